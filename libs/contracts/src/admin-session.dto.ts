import { ApiProperty } from '@nestjs/swagger';
import { IsNotEmpty, IsString, MaxLength } from 'class-validator';
import { Status } from './status';

/** Body of POST /admin/session: the admin page's sign-in. */
export class AdminSignInDto {
  @ApiProperty()
  @IsString()
  @IsNotEmpty()
  @MaxLength(128)
  username!: string;

  @ApiProperty()
  @IsString()
  @MaxLength(1024)
  password!: string;
}

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
