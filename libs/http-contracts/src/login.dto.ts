import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Status } from '@app/contracts';
import { TextField } from './request.fields';

/** Body of POST /v1/login. */
export class LoginRequestDto {
  @TextField({ notEmpty: true, maxLength: 128 })
  username!: string;

  @TextField({ maxLength: 1024 })
  password!: string;

  @TextField({
    presence: 'absent-or-null',
    description: 'Default database for the token.',
    notEmpty: true,
    maxLength: 63,
  })
  database?: string;
}

/**
 * The requests /docs offers to send to POST /v1/login as they are: the user the examples of
 * POST /v1/users make (docs.e2e-spec makes it, sends each and expects a success).
 */
export const LOGIN_REQUEST_EXAMPLES = {
  login: {
    summary: 'The user made by the example of POST /v1/users',
    value: { username: 'alice', password: 'correct-horse-battery' },
  },
} as const satisfies Record<string, { summary: string; value: LoginRequestDto }>;

/** Answer of POST /v1/login. */
export class LoginResponseDto {
  @ApiProperty({ description: 'HS256 JWT to send as `Authorization: Bearer <token>`.' })
  access_token!: string;

  @ApiProperty()
  username!: string;

  @ApiPropertyOptional({ nullable: true })
  database!: string | null;

  @ApiProperty({ description: 'Seconds until the token expires.' })
  expires_in!: number;

  @ApiProperty()
  status!: Status;
}
