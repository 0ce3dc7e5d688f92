import { SluiceError } from '@app/contracts';
import { ADMIN_COOKIE, adminCookie, adminCookieOf, clearedAdminCookie } from './admin.cookie';

describe(adminCookie.name, () => {
  it('is HttpOnly, SameSite=Strict, scoped to /admin and short-lived; Secure over https', () => {
    expect(adminCookie('a.b-c_d', 900, { secure: false })).toBe(
      'sluice_admin=a.b-c_d; Path=/admin; Max-Age=900; HttpOnly; SameSite=Strict',
    );
    expect(adminCookie('a.b.c', 60, { secure: true })).toMatch(/; SameSite=Strict; Secure$/);
  });

  it('refuses a value that is not a signed token (no way to smuggle attributes in)', () => {
    expect(() => adminCookie('x; Path=/', 900, { secure: false })).toThrow();
  });

  it('is cleared with the same name, path and flags and no life left', () => {
    expect(clearedAdminCookie({ secure: false })).toBe(
      'sluice_admin=; Path=/admin; Max-Age=0; HttpOnly; SameSite=Strict',
    );
  });
});

describe(adminCookieOf.name, () => {
  it('finds the cookie among others, in any place', () => {
    expect(adminCookieOf(`${ADMIN_COOKIE}=t.o.k`)).toBe('t.o.k');
    expect(adminCookieOf(`a=1; ${ADMIN_COOKIE}=t.o.k; b=2`)).toBe('t.o.k');
    expect(adminCookieOf(`${ADMIN_COOKIE}="t.o.k"`)).toBe('t.o.k');
  });

  it('finds nothing when it is absent, cleared, or only a look-alike', () => {
    expect(adminCookieOf(undefined)).toBeUndefined();
    expect(adminCookieOf('')).toBeUndefined();
    expect(adminCookieOf(`${ADMIN_COOKIE}=`)).toBeUndefined();
    expect(adminCookieOf(`x${ADMIN_COOKIE}=t; ${ADMIN_COOKIE}x=t`)).toBeUndefined();
  });

  it('refuses the cookie sent twice with 400 rather than pick one', () => {
    let thrown: unknown;
    try {
      adminCookieOf(`${ADMIN_COOKIE}=a.b.c; other=1; ${ADMIN_COOKIE}=d.e.f`);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(SluiceError);
    expect((thrown as SluiceError).http).toBe(400);
    expect((thrown as SluiceError).message).toMatch(/more than once/);
  });
});
