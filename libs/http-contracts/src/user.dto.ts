import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Status } from '@app/contracts';
import { FlagField, TextField } from './request.fields';

/** User names: no `@` (login takes `user@database`), nothing that needs quoting anywhere. */
export const USER_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,128}$/;

/** No NUL: it would cut the protocol message a role name travels in. */
const NO_NUL = /^[^\u0000]+$/; // eslint-disable-line no-control-regex

const ROLE = {
  description: 'PostgreSQL role the statements run as; it must exist.',
  notEmpty: true,
  maxLength: 63,
  pattern: { regex: NO_NUL, message: 'role must not contain NUL' },
};

/** Body of POST /v1/users. */
export class CreateUserDto {
  @TextField({
    description: 'Letters, digits, `_`, `.` and `-`; at most 128.',
    pattern: {
      regex: USER_NAME_PATTERN,
      message: 'username may hold only letters, digits, _ . - (1 to 128)',
    },
  })
  username!: string;

  @TextField({ description: 'At least 8 characters.', minLength: 8, maxLength: 1024 })
  password!: string;

  @TextField(ROLE)
  role!: string;

  @FlagField({ presence: 'absent', default: false, description: 'May manage users.' })
  admin?: boolean;

  @FlagField({
    presence: 'absent',
    default: false,
    description: 'Statements run in read-only transactions.',
  })
  read_only?: boolean;

  @FlagField({ presence: 'absent', default: true })
  enabled?: boolean;
}

/** Body of PATCH /v1/users/{name}: the fields to change. */
export class UpdateUserDto {
  @TextField({
    presence: 'absent',
    description: 'New password; ends every session of the user.',
    minLength: 8,
    maxLength: 1024,
  })
  password?: string;

  @TextField({ ...ROLE, presence: 'absent' })
  role?: string;

  @FlagField({ presence: 'absent' })
  admin?: boolean;

  @FlagField({ presence: 'absent' })
  read_only?: boolean;

  @FlagField({ presence: 'absent' })
  enabled?: boolean;
}

/**
 * The requests /docs offers to send to POST /v1/users and PATCH /v1/users/{name} as they are:
 * one user, `alice`, of a role `analyst` that must exist in PostgreSQL (as any user's role must).
 * docs.e2e-spec makes the role, sends each and expects a success.
 */
export const CREATE_USER_EXAMPLES = {
  analyst: {
    summary: 'A user whose statements run as the PostgreSQL role analyst',
    value: { username: 'alice', password: 'correct-horse-battery', role: 'analyst' },
  },
} as const satisfies Record<string, { summary: string; value: CreateUserDto }>;

/** The user the examples change (the path parameter of PATCH /v1/users/{name}). */
export const EXAMPLE_USER_NAME = CREATE_USER_EXAMPLES.analyst.value.username;

export const UPDATE_USER_EXAMPLES = {
  readOnly: {
    summary: 'Read-only from now on',
    value: { read_only: true },
  },
} as const satisfies Record<string, { summary: string; value: UpdateUserDto }>;

/** A user as the api shows it: never the password or its hash. */
export class UserDto {
  @ApiProperty()
  username!: string;

  @ApiProperty()
  role!: string;

  @ApiProperty()
  admin!: boolean;

  @ApiProperty()
  read_only!: boolean;

  @ApiProperty()
  enabled!: boolean;

  @ApiProperty({ format: 'date-time' })
  created_at!: string;

  @ApiProperty({ format: 'date-time' })
  updated_at!: string;

  @ApiPropertyOptional({
    type: [String],
    description:
      'POST and PATCH of a role: what about the role reaches beyond it (it can log in, it has CREATEROLE or BYPASSRLS), also logged by the api as ROLE ISOLATION.',
  })
  warnings?: string[];

  @ApiPropertyOptional({
    description:
      'GET of one user: the PostgreSQL login role its statements run over (made by Sluice).',
  })
  login_role?: string;

  @ApiPropertyOptional({
    type: 'object',
    additionalProperties: { type: 'string' },
    description:
      "GET of one user: temp_file_limit, work_mem and statement_timeout as the login role's sessions start with them (stored on the login role, else the server's). Only temp_file_limit binds: a superuser sets it on the login role (`ALTER ROLE <login_role> SET temp_file_limit = '1GB'`), and Sluice keeps it.",
  })
  limits?: Record<string, string>;
}

/** Answer of POST, GET and PATCH on one user. */
export class UserResponseDto extends UserDto {
  @ApiProperty()
  status!: Status;
}

/** Answer of GET /v1/users. */
export class UserListDto {
  @ApiProperty({ type: [UserDto] })
  users!: UserDto[];

  @ApiProperty()
  status!: Status;
}

/** Answer of operations that return nothing but their outcome (logout, delete). */
export class StatusResponseDto {
  @ApiProperty()
  status!: Status;
}
