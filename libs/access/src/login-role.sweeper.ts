import type { Queryable } from './login-role.provisioner';
import { isLoginRoleNameFor, loginRoleName } from './login.role';

/** A login role of an earlier key that was not dropped, and why. */
export interface KeptLoginRole {
  login: string;
  /** The user role it is a member of. */
  role: string;
  /**
   * `in-use`: a backend is logged in as it (a worker still on the earlier key, or an idle pooled
   * connection); `blocked`: PostgreSQL refused to drop it (it owns objects or holds privileges,
   * or the control login may not drop it), with PostgreSQL's reason.
   */
  why: 'in-use' | 'blocked';
  detail?: string;
}

/** What one sweep did. */
export interface LoginRoleSweep {
  dropped: { login: string; role: string }[];
  kept: KeptLoginRole[];
}

interface Candidate {
  login: string;
  role: string;
}

const ident = (name: string) => '"' + name.replace(/"/g, '""') + '"';

/**
 * Login roles that look like Sluice's, in one query: the name form, LOGIN and no power of its
 * own, a member of exactly one role, which is one of `roles`, and with no member of its own.
 * `$2`: one login's name, or null for every one.
 */
const CANDIDATES = `
  SELECT l.rolname::text AS login, min(g.rolname::text) AS role
    FROM pg_roles l
    JOIN pg_auth_members m ON m.member = l.oid
    JOIN pg_roles g ON g.oid = m.roleid
   WHERE l.rolname ~ '^sluice_[0-9a-f]{10}_'
     AND ($2::text IS NULL OR l.rolname = $2)
     AND l.rolcanlogin
     AND NOT (l.rolsuper OR l.rolcreaterole OR l.rolcreatedb OR l.rolreplication
              OR l.rolbypassrls)
     AND NOT EXISTS (SELECT 1 FROM pg_auth_members o WHERE o.roleid = l.oid)
   GROUP BY l.rolname
  HAVING count(DISTINCT g.oid) = 1 AND min(g.rolname::text) = ANY($1::text[])`;

/**
 * Drops the login roles that LoginRoleProvisioner made under an earlier SLUICE_CREDENTIAL_KEY
 * (their names carry another key's tag) once no backend is logged in as them. Only roles that are
 * unmistakably Sluice's are touched: named `sluice_<tag>_<R>` for a role R of `roles` (the user
 * roles of Sluice's users), able to log in with no power of their own, members of R and of
 * nothing else, with no members. A role that owns objects or holds privileges (a statement may
 * act as its login role after RESET ROLE) is kept and reported: REASSIGN OWNED needs rights the
 * control login lacks, and DROP OWNED would drop a user's data.
 */
export class LoginRoleSweeper {
  constructor(private readonly secret: string) {}

  /** One sweep over `client` (a connection of its own: each drop is a transaction). */
  async sweep(client: Queryable, roles: readonly string[]): Promise<LoginRoleSweep> {
    const result: LoginRoleSweep = { dropped: [], kept: [] };
    const { rows } = await client.query<Candidate>(CANDIDATES, [roles, null]);
    for (const candidate of rows.filter((c) => this.isEarlierKeys(c))) {
      const outcome = await this.dropIfUnused(client, candidate, roles);
      if (outcome === 'dropped') result.dropped.push(candidate);
      else if (outcome !== 'gone') result.kept.push({ ...candidate, ...outcome });
    }
    return result;
  }

  /** Named as Sluice names the login role of its role, but not under the current key. */
  private isEarlierKeys({ login, role }: Candidate): boolean {
    return isLoginRoleNameFor(login, role) && login !== loginRoleName(role, this.secret);
  }

  private async dropIfUnused(
    client: Queryable,
    { login, role }: Candidate,
    roles: readonly string[],
  ): Promise<'dropped' | 'gone' | Pick<KeptLoginRole, 'why' | 'detail'>> {
    await client.query('BEGIN');
    try {
      // The provisioner's lock: a process still on the earlier key may be repairing this role.
      const { rows: locked } = await client.query<{ ok: boolean }>(
        'SELECT pg_try_advisory_xact_lock(hashtext($1)) AS ok',
        [`sluice-login:${login}`],
      );
      if (!locked[0].ok) {
        await client.query('ROLLBACK');
        return { why: 'in-use', detail: 'being set up by another process' };
      }
      // Read again under the lock: still the same kind of role, still a member of the same role.
      const { rows: again } = await client.query<Candidate>(CANDIDATES, [roles, login]);
      if (again.length === 0 || again[0].role !== role) {
        await client.query('ROLLBACK');
        return 'gone';
      }
      // Every database's backends, idle pooled ones included; usesysid is shown to every role.
      const { rows: backends } = await client.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity a JOIN pg_roles r ON r.oid = a.usesysid
          WHERE r.rolname = $1`,
        [login],
      );
      if (backends[0].n > 0) {
        await client.query('ROLLBACK');
        return { why: 'in-use', detail: `${backends[0].n} backend(s) logged in as it` };
      }
      await client.query(`DROP ROLE ${ident(login)}`);
      await client.query('COMMIT');
      return 'dropped';
    } catch (err) {
      // The error itself is the outcome reported; the rollback only ends the transaction.
      await client.query('ROLLBACK').catch(() => undefined);
      const { code, message, detail } = err as { code?: string; message: string; detail?: string };
      // 2BP01: objects or privileges depend on it; 42501: the control login may not drop it.
      if (code === '2BP01' || code === '42501') {
        return { why: 'blocked', detail: detail ? `${message}: ${detail}` : message };
      }
      throw err;
    }
  }
}
