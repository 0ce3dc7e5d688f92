import { LoginRoleProvisioner } from './login-role.provisioner';
import {
  isLoginRoleNameFor,
  loginRoleName,
  loginRolePassword,
  scramVerifier,
  serviceLogin,
} from './login.role';

const KEY = 'k'.repeat(32);

describe('loginRoleName', () => {
  it('is readable, stable, and differs per role and per key', () => {
    expect(loginRoleName('analyst', KEY)).toMatch(/^sluice_[0-9a-f]{10}_analyst$/);
    expect(loginRoleName('analyst', KEY)).toBe(loginRoleName('analyst', KEY));
    expect(loginRoleName('analyst', KEY)).not.toBe(loginRoleName('analysts', KEY));
    expect(loginRoleName('analyst', KEY)).not.toBe(loginRoleName('analyst', 'x'.repeat(32)));
  });

  it('fits PostgreSQL 63-byte names and stays unique when long names share a prefix', () => {
    const a = 'é'.repeat(40) + 'a';
    const b = 'é'.repeat(40) + 'b';
    for (const name of [loginRoleName(a, KEY), loginRoleName(b, KEY)]) {
      expect(Buffer.byteLength(name)).toBeLessThanOrEqual(63);
      expect(name).not.toContain('\uFFFD');
    }
    expect(loginRoleName(a, KEY)).not.toBe(loginRoleName(b, KEY));
  });
});

describe('isLoginRoleNameFor', () => {
  it('knows the login role of a role under any key, long names cut as they are', () => {
    const long = 'é'.repeat(40) + 'a';
    for (const role of ['analyst', long]) {
      expect(isLoginRoleNameFor(loginRoleName(role, KEY), role)).toBe(true);
      expect(isLoginRoleNameFor(loginRoleName(role, 'x'.repeat(32)), role)).toBe(true);
    }
  });

  it('refuses names of another role, another form or another tag length', () => {
    expect(isLoginRoleNameFor(loginRoleName('analyst', KEY), 'analysts')).toBe(false);
    expect(isLoginRoleNameFor(loginRoleName('analysts', KEY), 'analyst')).toBe(false);
    expect(isLoginRoleNameFor('sluice_abc_analyst', 'analyst')).toBe(false);
    expect(isLoginRoleNameFor('sluice_0123456789a_analyst', 'analyst')).toBe(false);
    expect(isLoginRoleNameFor('sluice_0123456789_analyst', 'analyst')).toBe(true);
    expect(isLoginRoleNameFor('sluice_0123456789_analyst', 'analys')).toBe(false);
    expect(isLoginRoleNameFor('xsluice_0123456789_analyst', 'analyst')).toBe(false);
  });
});

describe('loginRolePassword', () => {
  it('is long, derived from the key, and never the role name', () => {
    const password = loginRolePassword('analyst', KEY);
    expect(password).toHaveLength(43);
    expect(password).toBe(loginRolePassword('analyst', KEY));
    expect(password).not.toBe(loginRolePassword('analyst', 'x'.repeat(32)));
  });
});

describe('scramVerifier', () => {
  it("has PostgreSQL's stored form and does not contain the password", () => {
    const verifier = scramVerifier('s3cret-password', Buffer.alloc(16, 1));
    expect(verifier).toMatch(
      /^SCRAM-SHA-256\$4096:[A-Za-z0-9+/=]{24}\$[A-Za-z0-9+/=]{44}:[A-Za-z0-9+/=]{44}$/,
    );
    expect(verifier).not.toContain('s3cret');
    expect(scramVerifier('s3cret-password')).not.toBe(scramVerifier('s3cret-password'));
  });
});

describe(LoginRoleProvisioner.name, () => {
  it("derives a role's service login once, and the same as serviceLogin does", () => {
    const provisioner = new LoginRoleProvisioner(KEY);
    const login = provisioner.serviceLogin('app_reader');
    expect(login).toEqual(serviceLogin('app_reader', KEY));
    expect(provisioner.serviceLogin('app_reader')).toBe(login);
    expect(Object.isFrozen(login)).toBe(true);
    expect(provisioner.serviceLogin('app_writer').user).not.toBe(login.user);
  });
});
