import { createHash, createHmac, pbkdf2Sync } from 'node:crypto';
import { db, until } from './support/client';
import {
  LoggedInUser,
  adminCall,
  createLoggedInUser,
  createRole,
  createUser,
  executeAs,
  loginRoleOf,
  usersAndRolesDroppedAfterAll,
} from './support/users';
import { randomName } from './support/service';

/**
 * Sluice repairs a role's login role (created, given its password back, its stored settings
 * dropped) over the control login. A hostile user of another role, or of the same one, tries to
 * keep that repair from happening: every user of the role would be locked out.
 */
const made = usersAndRolesDroppedAfterAll();
let victimRole: string;
let attacker: LoggedInUser;

beforeAll(async () => {
  victimRole = await createRole('e2e_lr_victim');
  made.roles.push(victimRole);
  attacker = await createLoggedInUser(made, { prefix: 'e2e_lr_attacker' });
});

describe('a statement holding the lock the repair takes', () => {
  it('delays the repair of another role by moments, not for as long as it runs', async () => {
    // The first user of the role makes its login role.
    const first = await createUser({ role: victimRole, prefix: 'e2e_lr_victim' });
    made.users.push(first.username);
    // The lock's key is no secret (hashtext of the login's name, and pg_locks shows it).
    const login = `sluice\\_%\\_${victimRole.replace(/_/g, '\\_')}`;
    // Marked, so that the checks below see this statement only, not those of other suites on the
    // same server.
    const mark = randomName('holding');
    const holding = executeAs(attacker.token, {
      statement: `select pg_advisory_xact_lock(hashtext('sluice-login:' ||
          (select rolname from pg_roles where rolname like '${login}'))), pg_sleep(30) /* ${mark} */`,
    });
    await until(async () => {
      const { rows } = await db().query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
          WHERE l.locktype = 'advisory' AND l.granted AND a.query LIKE '%' || $1 || '%'
            AND a.pid <> pg_backend_pid()`,
        [mark],
      );
      return rows[0].n === 1;
    }, 10_000);
    const started = Date.now();
    const second = await adminCall('POST', '/v1/users', {
      username: randomName('e2e_lr_second'),
      password: 'a-password-of-some-length',
      role: victimRole,
    });
    made.users.push(second.json.username as string);
    expect(second.status).toBe(201);
    expect(Date.now() - started).toBeLessThan(10_000);
    await db().query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%' || $1 || '%'
         AND pid <> pg_backend_pid()`,
      [mark],
    );
    await holding;
  });
});

describe('a password a user gives its login role', () => {
  /** The login role's stored verifier (superuser only). */
  async function verifierOf(role: string): Promise<string> {
    const { rows } = await db().query<{ v: string }>(
      `SELECT a.rolpassword AS v FROM pg_authid a JOIN pg_auth_members m ON m.member = a.oid
         JOIN pg_roles r ON r.oid = m.roleid
        WHERE r.rolname = $1 AND a.rolcanlogin AND a.rolname = $2`,
      [role, loginRoleOf(role)],
    );
    return rows[0].v;
  }

  /** Whether a SCRAM-SHA-256 verifier takes `password` (PostgreSQL's check, done here). */
  function accepts(verifier: string, password: string): boolean {
    const [, iterations, salt, stored] = /^SCRAM-SHA-256\$(\d+):([^$]+)\$([^:]+):/.exec(verifier)!;
    const salted = pbkdf2Sync(
      password,
      Buffer.from(salt, 'base64'),
      Number(iterations),
      32,
      'sha256',
    );
    const clientKey = createHmac('sha256', salted).update('Client Key').digest();
    return createHash('sha256').update(clientKey).digest('base64') === stored;
  }

  it('is gone once the user is deleted: the login role takes back its own', async () => {
    // The role's only user: no other statement of the role would find the password changed.
    const leaving = await createLoggedInUser(made, { prefix: 'e2e_lr_leaving' });
    expect((await executeAs(leaving.token, { statement: 'select 1' })).status).toBe(200);
    // With a password of its own, it could log in to PostgreSQL directly, outside Sluice.
    const res = await executeAs(leaving.token, {
      statement: `do $$ begin reset role;
        execute format('alter role %I password %L', session_user, 'chosen-by-the-user'); end $$`,
    });
    expect(res.status).toBe(200);
    expect(accepts(await verifierOf(leaving.role), 'chosen-by-the-user')).toBe(true);
    expect((await adminCall('DELETE', `/v1/users/${leaving.username}`)).status).toBe(200);
    expect(accepts(await verifierOf(leaving.role), 'chosen-by-the-user')).toBe(false);
  });
});
