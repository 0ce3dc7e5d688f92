import { Body, Controller, HttpCode, Post } from '@nestjs/common';
import { ApiOkResponse, ApiTags, ApiUnauthorizedResponse } from '@nestjs/swagger';
import { LoginRequestDto, LoginResponseDto } from '@app/contracts';
import { AuthService } from './auth.service';

@ApiTags('auth')
@Controller('v1')
export class AuthController {
  constructor(private readonly auth: AuthService) {}

  @Post('login')
  @HttpCode(200)
  @ApiOkResponse({ type: LoginResponseDto })
  @ApiUnauthorizedResponse({ description: 'Bad credentials (vendor_code -304).' })
  login(@Body() body: LoginRequestDto): Promise<LoginResponseDto> {
    return this.auth.login(body);
  }
}
