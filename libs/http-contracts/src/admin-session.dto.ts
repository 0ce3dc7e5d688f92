import { ApiProperty, OmitType } from '@nestjs/swagger';
import { LoginRequestDto } from './login.dto';
import { Status } from '@app/contracts';

/** Body of POST /admin/session: the admin page's sign-in (a login without a database). */
export class AdminSignInDto extends OmitType(LoginRequestDto, ['database'] as const) {}

/** Answer of POST and GET /admin/session: who the admin cookie signs in, and for how long. */
export class AdminSessionDto {
  @ApiProperty()
  username!: string;

  @ApiProperty({ description: 'Whether the user is an administrator (sees every query).' })
  admin!: boolean;

  @ApiProperty({ description: 'Seconds until the sign-in cookie expires.' })
  expires_in!: number;

  @ApiProperty()
  status!: Status;
}
