import { Body, Controller, Delete, Get, Header, HttpCode, Post, Req, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AdminSessionDto, AdminSignInDto, StatusResponseDto } from '@app/http-contracts';
import { AdminSessionService } from './admin-session.service';

/**
 * The admin pages' sign-in cookie: POST signs in, GET says who is signed in, DELETE signs out.
 * Cross-site POST and DELETE are refused before they get here, like every change.
 */
@ApiExcludeController()
@Controller('admin/session')
export class AdminSessionController {
  constructor(private readonly sessions: AdminSessionService) {}

  @Post()
  @HttpCode(200)
  @Header('cache-control', 'no-store')
  async signIn(
    @Body() body: AdminSignInDto,
    @Req() request: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<AdminSessionDto> {
    const { session, cookie } = await this.sessions.signIn(body, request);
    void reply.header('set-cookie', cookie);
    return session;
  }

  @Get()
  @Header('cache-control', 'no-store')
  current(@Req() request: FastifyRequest): Promise<AdminSessionDto> {
    return this.sessions.current(request);
  }

  @Delete()
  @HttpCode(200)
  @Header('cache-control', 'no-store')
  signOut(
    @Req() request: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<StatusResponseDto> {
    // Cleared first: the browser forgets the cookie even if ending its session fails.
    void reply.header('set-cookie', this.sessions.clearingCookie(request));
    return this.sessions.signOut(request);
  }
}
