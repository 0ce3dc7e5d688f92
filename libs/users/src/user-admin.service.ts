import { Inject, Injectable, Logger } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { SluiceError } from '@app/contracts';
import { CreateUserDto, USER_NAME_PATTERN, UpdateUserDto, UserDto } from '@app/http-contracts';
import { LoginRoleError } from '@app/access';
import { MetadataEventsService } from './metadata-events.service';
import { MetadataSchema } from './metadata.schema';
import { hashPassword } from './password.hasher';
import { RoleCatalogService } from './role-catalog.service';
import { UsersService } from './users.service';
import { QueriesOfUser } from './queries-of.user';
import { METADATA_POOL, QUERIES_OF_USER } from './users.tokens';

interface UserRow {
  username: string;
  role: string;
  is_admin: boolean;
  read_only: boolean;
  enabled: boolean;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = 'username, role, is_admin, read_only, enabled, created_at, updated_at';

function toDto(row: UserRow): UserDto {
  return {
    username: row.username,
    role: row.role,
    admin: row.is_admin,
    read_only: row.read_only,
    enabled: row.enabled,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

/**
 * Makes sure statements can run as `role`: it exists and Sluice keeps a login role for it that
 * reaches that role and nothing else. Answers with UNKNOWN_ROLE when it cannot be used; else with
 * what about the role deserves a warning (it can log in, it has CREATEROLE…).
 */
export async function requireRole(roles: RoleCatalogService, role: string): Promise<string[]> {
  try {
    return (await roles.provision(role)).warnings;
  } catch (err) {
    if (err instanceof LoginRoleError) throw new SluiceError('UNKNOWN_ROLE', err.message);
    throw new SluiceError('DB_UNAVAILABLE', 'cannot set up the login role of this role');
  }
}

/** The user, with the warnings about its role when there are any. */
function withWarnings(user: UserDto, warnings: string[]): UserDto {
  return warnings.length > 0 ? { ...user, warnings } : user;
}

const notFound = (name: string) =>
  new SluiceError('NOT_FOUND', `no user named ${JSON.stringify(name.slice(0, 128))}`);

/**
 * Manages the users in `sluice.users` for the api and `sluice users` alike, both built by
 * UserAdminModule. A user's role must exist and get a login role of its own (see
 * RoleCatalogService.provision). Every change is announced to all api processes, so a disabled
 * user is locked out everywhere at once; a deleted user's queries are forgotten, and a moved
 * user's ended, by the one making the change (QueriesOfUser).
 */
@Injectable()
export class UserAdminService {
  private readonly logger = new Logger(UserAdminService.name);

  constructor(
    @Inject(METADATA_POOL) private readonly pool: Pool,
    private readonly schema: MetadataSchema,
    private readonly roles: RoleCatalogService,
    private readonly events: MetadataEventsService,
    private readonly users: UsersService,
    @Inject(QUERIES_OF_USER) private readonly queries: QueriesOfUser,
  ) {}

  async list(): Promise<UserDto[]> {
    await this.schema.ensure();
    const { rows } = await this.pool.query<UserRow>(
      `SELECT ${COLUMNS} FROM sluice.users ORDER BY username`,
    );
    return rows.map(toDto);
  }

  async get(username: string): Promise<UserDto> {
    if (!USER_NAME_PATTERN.test(username)) throw notFound(username);
    await this.schema.ensure();
    const { rows } = await this.pool.query<UserRow>(
      `SELECT ${COLUMNS} FROM sluice.users WHERE username = $1`,
      [username],
    );
    if (!rows[0]) throw notFound(username);
    const user = toDto(rows[0]);
    try {
      const { login, limits } = await this.roles.limitsOf(user.role);
      return { ...user, login_role: login, limits };
    } catch (err) {
      // The user as the metadata database has it: the limits come back with the database.
      this.logger.warn(`cannot read the limits of role "${user.role}": ${(err as Error).message}`);
      return user;
    }
  }

  async create(user: CreateUserDto): Promise<UserDto> {
    await this.schema.ensure();
    const warnings = await this.requireRole(user.role);
    try {
      const { rows } = await this.pool.query<UserRow>(
        `INSERT INTO sluice.users
           (username, password_hash, role, is_admin, read_only, enabled, token_generation)
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${COLUMNS}`,
        [
          user.username,
          await hashPassword(user.password),
          user.role,
          user.admin ?? false,
          user.read_only ?? false,
          user.enabled ?? true,
          randomUUID(),
        ],
      );
      await this.changed(user.username);
      return withWarnings(toDto(rows[0]), warnings);
    } catch (err) {
      if ((err as { code?: string }).code === '23505') {
        throw new SluiceError('USER_EXISTS', `a user named "${user.username}" already exists`);
      }
      throw err;
    }
  }

  /** Changes the given fields; `actor` (the admin doing it) cannot lock themselves out. */
  async update(username: string, change: UpdateUserDto, actor?: string): Promise<UserDto> {
    if (!USER_NAME_PATTERN.test(username)) throw notFound(username);
    if (actor === username && (change.enabled === false || change.admin === false)) {
      throw new SluiceError(
        'INVALID_REQUEST',
        'you cannot disable your own account or take away your own admin rights',
      );
    }
    const sets: string[] = [];
    const values: unknown[] = [username];
    let warnings: string[] = [];
    const set = (column: string, value: unknown) => {
      values.push(value);
      sets.push(`${column} = $${values.length}`);
    };
    if (change.role !== undefined) {
      warnings = await this.requireRole(change.role);
      set('role', change.role);
    }
    if (change.password !== undefined) {
      set('password_hash', await hashPassword(change.password));
      // A new password ends every session begun with the old one.
      set('token_generation', randomUUID());
    }
    if (change.admin !== undefined) set('is_admin', change.admin);
    if (change.read_only !== undefined) set('read_only', change.read_only);
    if (change.enabled !== undefined) set('enabled', change.enabled);
    if (sets.length === 0) throw new SluiceError('INVALID_REQUEST', 'nothing to change');
    await this.schema.ensure();
    // The role before, read in the same statement (locked): only a change of it ends anything.
    const { rows } = await this.pool.query<UserRow & { role_before: string }>(
      `WITH before AS (SELECT role FROM sluice.users WHERE username = $1 FOR UPDATE)
       UPDATE sluice.users SET ${sets.join(', ')}, updated_at = now()
        WHERE username = $1 RETURNING ${COLUMNS}, (SELECT role FROM before) AS role_before`,
      values,
    );
    if (!rows[0]) throw notFound(username);
    await this.changed(username);
    if (rows[0].role !== rows[0].role_before || change.enabled === false) {
      await this.retakeLogin(username, rows[0].role_before);
    }
    if (rows[0].role !== rows[0].role_before) {
      // After the change: a query admitted from now on runs as the new role.
      await this.queries.roleChanged(username).catch((err: Error) => {
        // The role is changed all the same: what the old one kept lapses by its TTL.
        this.logger.warn(
          `user ${username}: role changed; could not end their queries: ${err.message}`,
        );
      });
    }
    return withWarnings(toDto(rows[0]), warnings);
  }

  async remove(username: string, actor?: string): Promise<void> {
    if (!USER_NAME_PATTERN.test(username)) throw notFound(username);
    if (actor === username) {
      throw new SluiceError('INVALID_REQUEST', 'you cannot remove your own account');
    }
    await this.schema.ensure();
    const { rows } = await this.pool.query<{ role: string }>(
      'DELETE FROM sluice.users WHERE username = $1 RETURNING role',
      [username],
    );
    if (!rows[0]) throw notFound(username);
    await this.changed(username);
    await this.retakeLogin(username, rows[0].role);
    // After the row is gone: no new query of theirs is admitted while their data is forgotten.
    await this.queries.forgetUser(username).catch((err: Error) => {
      // Tied to the deleted user's id, what is left is nobody else's: it lapses by its TTL.
      this.logger.warn(`user ${username} deleted; could not forget their queries: ${err.message}`);
    });
  }

  /**
   * A user who leaves a role (deleted, disabled, moved) may have given its login role a password
   * of its own (ALTER ROLE session_user PASSWORD, after RESET ROLE) to log in to PostgreSQL outside
   * Sluice: the login role takes back its own. Sessions already open stay.
   */
  private async retakeLogin(username: string, role: string): Promise<void> {
    await this.roles.provision(role, { resetPassword: true }).catch((err: Error) => {
      this.logger.warn(
        `user ${username}: could not reset the login role of "${role}": ${err.message}`,
      );
    });
  }

  private requireRole(role: string): Promise<string[]> {
    return requireRole(this.roles, role);
  }

  private async changed(username: string): Promise<void> {
    this.users.forget(username);
    await this.events.publish({ kind: 'user', username });
  }
}
