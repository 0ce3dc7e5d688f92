import { Injectable } from '@nestjs/common';
import { PassportStrategy } from '@nestjs/passport';
import type { FastifyRequest } from 'fastify';
import { BasicStrategy as Strategy } from 'passport-http';
import { AuthUser } from './auth-user';
import { AuthService } from './auth.service';

/** `Authorization: Basic` on execute, checked (and throttled) like a login. */
@Injectable()
export class BasicStrategy extends PassportStrategy(Strategy, 'basic') {
  constructor(private readonly auth: AuthService) {
    super({ passReqToCallback: true });
  }

  validate(request: FastifyRequest, username: string, password: string): Promise<AuthUser> {
    return this.auth.userFromPassword(username, password, request.ip);
  }
}
