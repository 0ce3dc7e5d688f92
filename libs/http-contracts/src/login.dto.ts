import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsNotEmpty, IsOptional, IsString, MaxLength } from 'class-validator';
import { Status } from '@app/contracts';

/** Body of POST /v1/login. */
export class LoginRequestDto {
  @ApiProperty()
  @IsString()
  @IsNotEmpty()
  @MaxLength(128)
  username!: string;

  @ApiProperty()
  @IsString()
  @MaxLength(1024)
  password!: string;

  @ApiPropertyOptional({ description: 'Default database for the token.' })
  @IsOptional()
  @IsString()
  @IsNotEmpty()
  @MaxLength(63)
  database?: string;
}

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
