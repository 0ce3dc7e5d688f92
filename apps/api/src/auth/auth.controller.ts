import { Body, Controller, HttpCode, Ip, Post, UseGuards } from '@nestjs/common';
import {
  ApiBearerAuth,
  ApiBody,
  ApiOkResponse,
  ApiTags,
  ApiTooManyRequestsResponse,
  ApiUnauthorizedResponse,
} from '@nestjs/swagger';
import {
  LOGIN_REQUEST_EXAMPLES,
  LoginRequestDto,
  LoginResponseDto,
  StatusResponseDto,
} from '@app/http-contracts';
import { AuthUser } from './auth-user';
import { AuthService } from './auth.service';
import { CredentialsGuard } from './credentials.guard';
import { CurrentUser } from './current-user.decorator';

@ApiTags('auth')
@Controller('v1')
export class AuthController {
  constructor(private readonly auth: AuthService) {}

  @Post('login')
  @HttpCode(200)
  @ApiBody({ type: LoginRequestDto, examples: LOGIN_REQUEST_EXAMPLES })
  @ApiOkResponse({ type: LoginResponseDto })
  @ApiUnauthorizedResponse({ description: 'Bad credentials (vendor_code -304).' })
  @ApiTooManyRequestsResponse({ description: 'Too many failed logins (-305), with Retry-After.' })
  login(@Body() body: LoginRequestDto, @Ip() address: string): Promise<LoginResponseDto> {
    return this.auth.login(body, address);
  }

  @Post('token_refresh')
  @HttpCode(200)
  @UseGuards(CredentialsGuard)
  @ApiBearerAuth()
  @ApiOkResponse({
    type: LoginResponseDto,
    description: 'A new token for a valid one, within the refresh window; the old one is revoked.',
  })
  refresh(@CurrentUser() user: AuthUser): Promise<LoginResponseDto> {
    return this.auth.refresh(user);
  }

  @Post('logout')
  @HttpCode(200)
  @UseGuards(CredentialsGuard)
  @ApiBearerAuth()
  @ApiOkResponse({ type: StatusResponseDto, description: 'The token stops working everywhere.' })
  logout(@CurrentUser() user: AuthUser): Promise<StatusResponseDto> {
    return this.auth.logout(user);
  }
}
