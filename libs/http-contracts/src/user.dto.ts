import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import {
  IsBoolean,
  IsNotEmpty,
  IsString,
  Matches,
  MaxLength,
  MinLength,
  ValidateIf,
} from 'class-validator';
import { Status } from '@app/contracts';

/** User names: no `@` (login takes `user@database`), nothing that needs quoting anywhere. */
export const USER_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,128}$/;

/** No NUL: it would cut the protocol message a role name travels in. */
const NO_NUL = /^[^\u0000]+$/; // eslint-disable-line no-control-regex

/** Optional, but not null: a field is either left out or holds a value of its type. */
const Optional = () => ValidateIf((_: object, value: unknown) => value !== undefined);

/** Body of POST /v1/users. */
export class CreateUserDto {
  @ApiProperty({ description: 'Letters, digits, `_`, `.` and `-`; at most 128.' })
  @IsString()
  @Matches(USER_NAME_PATTERN, {
    message: 'username may hold only letters, digits, _ . - (1 to 128)',
  })
  username!: string;

  @ApiProperty({ description: 'At least 8 characters.', minLength: 8 })
  @IsString()
  @MinLength(8)
  @MaxLength(1024)
  password!: string;

  @ApiProperty({ description: 'PostgreSQL role the statements run as; it must exist.' })
  @IsString()
  @IsNotEmpty()
  @MaxLength(63)
  @Matches(NO_NUL, { message: 'role must not contain NUL' })
  role!: string;

  @ApiPropertyOptional({ default: false, description: 'May manage users.' })
  @Optional()
  @IsBoolean()
  admin?: boolean;

  @ApiPropertyOptional({ default: false, description: 'Statements run in read-only transactions.' })
  @Optional()
  @IsBoolean()
  read_only?: boolean;

  @ApiPropertyOptional({ default: true })
  @Optional()
  @IsBoolean()
  enabled?: boolean;
}

/** Body of PATCH /v1/users/{name}: the fields to change. */
export class UpdateUserDto {
  @ApiPropertyOptional({ description: 'New password; ends every session of the user.' })
  @Optional()
  @IsString()
  @MinLength(8)
  @MaxLength(1024)
  password?: string;

  @ApiPropertyOptional()
  @Optional()
  @IsString()
  @IsNotEmpty()
  @MaxLength(63)
  @Matches(NO_NUL, { message: 'role must not contain NUL' })
  role?: string;

  @ApiPropertyOptional()
  @Optional()
  @IsBoolean()
  admin?: boolean;

  @ApiPropertyOptional()
  @Optional()
  @IsBoolean()
  read_only?: boolean;

  @ApiPropertyOptional()
  @Optional()
  @IsBoolean()
  enabled?: boolean;
}

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
