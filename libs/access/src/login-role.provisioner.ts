import { loginRoleName, loginRolePassword, scramVerifier, serviceLogin } from './login.role';
import { PgLogin } from './pg.login';

/** What the provisioner needs of a pg Client or Pool. */
export interface Queryable {
  query<R extends object = Record<string, unknown>>(
    text: string,
    values?: unknown[],
  ): Promise<{ rows: R[] }>;
}

/** Why a role cannot be given to a Sluice user; the message says what to do. */
export class LoginRoleError extends Error {
  constructor(
    readonly kind:
      'missing' | 'superuser' | 'control' | 'predefined' | 'foreign' | 'rights' | 'granted',
    message: string,
  ) {
    super(message);
    this.name = 'LoginRoleError';
  }
}

/** A membership of (or in) a login role that its provisioning could not revoke. */
interface UnrevokedGrant {
  granted: string;
  member: string;
  grantor: string | null;
}

/** The result of provisioning: the login role, and what about the user role deserves a warning. */
export interface ProvisionedLogin {
  login: string;
  created: boolean;
  warnings: string[];
}

/**
 * PostgreSQL's predefined roles whose members reach the database server's files and programs as
 * its OS user (COPY … FROM PROGRAM, pg_read_file): past every GRANT, so never a user's.
 */
export const SERVER_FILE_ROLES = [
  'pg_read_server_files',
  'pg_write_server_files',
  'pg_execute_server_program',
] as const;

/**
 * The predefined role whose members may write every table (PostgreSQL 14 on): Sluice's own
 * users table among them where it shares the users' database — a member could make itself an
 * administrator of any role. Never a user's.
 */
export const WRITE_ALL_ROLE = 'pg_write_all_data';

/** How long provisioning waits for its advisory lock before going on without it. */
const LOCK_WAIT_MS = 2000;

const ident = (name: string) => '"' + name.replace(/"/g, '""') + '"';
const literal = (text: string) => "'" + text.replace(/'/g, "''") + "'";

interface RoleFacts {
  exists: boolean;
  is_control: boolean;
  superuser: boolean | null;
  createrole: boolean | null;
  bypassrls: boolean | null;
  canlogin: boolean | null;
  login_oid: number | null;
  login_bad_attrs: boolean | null;
  extra_roles: string[] | null;
  members: string[] | null;
  has_role: boolean | null;
  /** Where settings are stored on the login role: database names, null for every database. */
  setting_databases: (string | null)[] | null;
  /** The SERVER_FILE_ROLES the role is a member of. */
  file_roles: string[];
  /** The role is a member of WRITE_ALL_ROLE. */
  writes_all: boolean;
}

/**
 * Keeps, for each user role R, one login role that is a member of R and of nothing else, so a
 * statement running on its connection can reach R's rights and no others — whatever it does with
 * SET ROLE, set_config('role', …) or SET SESSION AUTHORIZATION (which needs a superuser login).
 * Runs over the control login (DATABASE_URL), which needs CREATEROLE and, from PostgreSQL 16 on,
 * ADMIN OPTION on each user role; it never runs a user's statement.
 */
export class LoginRoleProvisioner {
  private readonly serviceLogins = new Map<string, PgLogin>();

  constructor(private readonly secret: string) {}

  loginFor(role: string): string {
    return loginRoleName(role, this.secret);
  }

  /** The login (name and password) statements of `role` run over. */
  serviceLogin(role: string): PgLogin {
    // Derived (two HKDFs and two HMACs) once per role, not once per statement.
    let login = this.serviceLogins.get(role);
    if (!login) {
      login = Object.freeze(serviceLogin(role, this.secret));
      this.serviceLogins.set(role, login);
    }
    return login;
  }

  /**
   * Creates or repairs the login role of `role`, in one transaction on `client` (a connection of
   * its own: BEGIN … COMMIT). With `resetPassword`, sets its password even when it exists.
   */
  async provision(
    client: Queryable,
    role: string,
    { resetPassword = false }: { resetPassword?: boolean } = {},
  ): Promise<ProvisionedLogin> {
    const login = this.loginFor(role);
    await client.query('BEGIN');
    try {
      await this.lockLogin(client, login);
      const facts = await this.facts(client, role, login);
      const warnings = this.check(role, login, facts);
      const verifier = literal(scramVerifier(loginRolePassword(role, this.secret)));
      const created = facts.login_oid === null;
      if (created) {
        await client.query(`CREATE ROLE ${ident(login)} LOGIN INHERIT PASSWORD ${verifier}`);
      } else if (resetPassword) {
        await client.query(`ALTER ROLE ${ident(login)} LOGIN INHERIT PASSWORD ${verifier}`);
      }
      // Memberships anyone added by hand would widen what the login reaches: take them away.
      for (const extra of facts.extra_roles ?? []) {
        await client.query(`REVOKE ${ident(extra)} FROM ${ident(login)}`);
      }
      for (const member of facts.members ?? []) {
        await client.query(`REVOKE ${ident(login)} FROM ${ident(member)}`);
      }
      if (!facts.has_role) await client.query(`GRANT ${ident(role)} TO ${ident(login)}`);
      // Settings stored on the login role (ALTER ROLE … SET, which its own sessions may run on
      // themselves) would apply to every new connection of it, for every user of the role, and
      // outlive the session reset: drop them, in every database.
      for (const database of facts.setting_databases ?? []) {
        const where = database === null ? '' : ` IN DATABASE ${ident(database)}`;
        await client.query(`ALTER ROLE ${ident(login)}${where} RESET ALL`);
      }
      const kept = facts.extra_roles ? await this.unrevoked(client, role, login) : [];
      await client.query('COMMIT');
      if (kept.length > 0) throw this.grantedError(role, login, kept);
      return { login, created, warnings };
    } catch (err) {
      if (err instanceof LoginRoleError && err.kind === 'granted') throw err;
      await client.query('ROLLBACK').catch(() => undefined); // the error below says what failed
      if ((err as { code?: string }).code === '42501') {
        throw new LoginRoleError(
          'rights',
          `the login role of DATABASE_URL may not create or grant the login role of "${role}": ` +
            `it needs CREATEROLE, and from PostgreSQL 16 on ADMIN OPTION on "${role}" (see README)`,
        );
      }
      throw err;
    }
  }

  /**
   * The memberships of the login role other than in `role` that its REVOKEs left (they reach
   * its statements; members of the login role do not):
   * from PostgreSQL 16 on, only a membership's grantor (or a superuser) may revoke it, so one
   * that a superuser granted stays however often the control login revokes it.
   */
  private async unrevoked(
    client: Queryable,
    role: string,
    login: string,
  ): Promise<UnrevokedGrant[]> {
    const { rows } = await client.query<UnrevokedGrant>(
      `SELECT g.rolname::text AS granted, l.rolname::text AS member, gr.rolname::text AS grantor
         FROM pg_auth_members m
         JOIN pg_roles g ON g.oid = m.roleid
         JOIN pg_roles l ON l.oid = m.member
         LEFT JOIN pg_roles gr ON gr.oid = m.grantor
        WHERE l.rolname = $2 AND g.rolname <> $1
        ORDER BY 1, 3`,
      [role, login],
    );
    return rows;
  }

  private grantedError(role: string, login: string, kept: UnrevokedGrant[]): LoginRoleError {
    const grants = kept.map(
      (k) =>
        `GRANT ${ident(k.granted)} TO ${ident(k.member)}` +
        (k.grantor === null ? '' : ` (granted by ${ident(k.grantor)})`),
    );
    return new LoginRoleError(
      'granted',
      `the login role "${login}" of role "${role}" must be a member of "${role}" and of nothing ` +
        `else, but ${grants.join(', ')} stays: only its grantor or ` +
        'a superuser may revoke it (PostgreSQL 16 and later), and until then the statements of ' +
        `"${role}" are refused: REVOKE … GRANTED BY its grantor`,
    );
  }

  /**
   * Two processes provisioning the same role at once: one waits for the other. Any user may hold
   * the same advisory lock (its key is no secret: pg_locks shows it) for as long as its
   * statement's time limit, so the wait is short, and past it provisioning goes on without the
   * lock: a process racing it may then fail on the role's row, and the call that needed it with
   * it (a user's statement, an admin's change), rather than every call waiting on that user.
   */
  private async lockLogin(client: Queryable, login: string): Promise<void> {
    await client.query('SAVEPOINT sluice_login_lock');
    await client.query(`SET LOCAL lock_timeout = ${LOCK_WAIT_MS}`);
    try {
      await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`sluice-login:${login}`]);
      await client.query('RELEASE SAVEPOINT sluice_login_lock');
    } catch (err) {
      if ((err as { code?: string }).code !== '55P03') throw err;
      // Also undoes the SET LOCAL above.
      await client.query('ROLLBACK TO SAVEPOINT sluice_login_lock');
      return;
    }
    await client.query('SET LOCAL lock_timeout = DEFAULT');
  }

  private async facts(client: Queryable, role: string, login: string): Promise<RoleFacts> {
    const { rows } = await client.query<RoleFacts>(
      `SELECT r.oid IS NOT NULL AS exists,
              r.oid IS NOT NULL AND pg_has_role(r.oid, current_user, 'MEMBER') AS is_control,
              -- A member of a superuser role may SET ROLE to it: as much a superuser as one.
              r.rolsuper OR EXISTS (SELECT 1 FROM pg_roles s
                                     WHERE s.rolsuper AND pg_has_role(r.oid, s.oid, 'MEMBER'))
                AS superuser,
              r.rolcreaterole AS createrole, r.rolbypassrls AS bypassrls,
              r.rolcanlogin AS canlogin, l.oid::int AS login_oid,
              (l.rolsuper OR l.rolcreaterole OR l.rolcreatedb OR l.rolreplication OR l.rolbypassrls)
                AS login_bad_attrs,
              (SELECT array_agg(g.rolname::text) FROM pg_auth_members m
                 JOIN pg_roles g ON g.oid = m.roleid
                WHERE m.member = l.oid AND m.roleid IS DISTINCT FROM r.oid) AS extra_roles,
              (SELECT array_agg(u.rolname::text) FROM pg_auth_members m
                 JOIN pg_roles u ON u.oid = m.member WHERE m.roleid = l.oid) AS members,
              EXISTS (SELECT 1 FROM pg_auth_members m WHERE m.member = l.oid AND m.roleid = r.oid)
                AS has_role,
              (SELECT array_agg(d.datname::text) FROM pg_db_role_setting s
                 LEFT JOIN pg_database d ON d.oid = s.setdatabase
                WHERE s.setrole = l.oid AND (s.setdatabase = 0 OR d.oid IS NOT NULL))
                AS setting_databases,
              ARRAY(SELECT p::text FROM unnest($3::name[]) p
                     WHERE r.oid IS NOT NULL AND pg_has_role(r.oid, p, 'MEMBER')) AS file_roles,
              EXISTS (SELECT 1 FROM pg_roles w
                       WHERE w.rolname = $4 AND r.oid IS NOT NULL
                         AND pg_has_role(r.oid, w.oid, 'MEMBER')) AS writes_all
         FROM (SELECT 1) one
         LEFT JOIN pg_roles r ON r.rolname = $1
         LEFT JOIN pg_roles l ON l.rolname = $2`,
      [role, login, SERVER_FILE_ROLES, WRITE_ALL_ROLE],
    );
    return rows[0];
  }

  private check(role: string, login: string, facts: RoleFacts): string[] {
    if (!facts.exists) throw new LoginRoleError('missing', `role "${role}" does not exist`);
    // Before the control check, which a superuser also passes (it is a member of every role).
    if (facts.superuser) {
      throw new LoginRoleError(
        'superuser',
        `role "${role}" is a superuser (or a member of one): its users could reach every role and ` +
          "the server's files",
      );
    }
    if (facts.is_control) {
      throw new LoginRoleError(
        'control',
        `role "${role}" is (or is a member of) the login role of DATABASE_URL, which may create ` +
          'and grant roles: a user of it could reach every other user',
      );
    }
    // PostgreSQL reserves pg_ names for its predefined roles, which reach past every GRANT: the
    // server's files and programs as its OS user (COPY … TO PROGRAM), every table. On
    // PostgreSQL 15 CREATEROLE may grant them, so a Sluice administrator could have become one.
    if (role.startsWith('pg_')) {
      throw new LoginRoleError(
        'predefined',
        `role "${role}" is one of PostgreSQL's predefined roles, which reach the database ` +
          "server's files and programs or every table: give users a role of your own",
      );
    }
    if (facts.file_roles.length > 0) {
      throw new LoginRoleError(
        'predefined',
        `role "${role}" is a member of ${facts.file_roles.join(', ')}, which reach the database ` +
          "server's files and programs: its users could read or run anything there",
      );
    }
    if (facts.writes_all) {
      throw new LoginRoleError(
        'predefined',
        `role "${role}" is a member of ${WRITE_ALL_ROLE}, which writes every table, Sluice's own ` +
          'users among them: its users could make themselves administrators',
      );
    }
    if (facts.login_bad_attrs) {
      throw new LoginRoleError(
        'foreign',
        `role "${login}" exists with SUPERUSER, CREATEROLE, CREATEDB, REPLICATION or BYPASSRLS; ` +
          'Sluice did not create it that way: drop it and let Sluice create it again',
      );
    }
    const warnings: string[] = [];
    if (facts.createrole) {
      warnings.push(`role "${role}" has CREATEROLE: its users can change other roles`);
    }
    if (facts.bypassrls)
      warnings.push(`role "${role}" has BYPASSRLS: row security does not bind it`);
    // A role may change its own password and settings (ALTER ROLE CURRENT_USER): a user of a
    // role that can log in can log in to PostgreSQL as it, outside Sluice, or lock out its owner.
    if (facts.canlogin) {
      warnings.push(
        `role "${role}" can log in: its users can set its password and settings, and log in ` +
          'to PostgreSQL as it outside Sluice; give Sluice users NOLOGIN roles',
      );
    }
    return warnings;
  }
}
