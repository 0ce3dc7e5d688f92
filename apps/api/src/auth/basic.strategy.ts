import { Injectable } from '@nestjs/common';
import { PassportStrategy } from '@nestjs/passport';
import { BasicStrategy as Strategy } from 'passport-http';
import { AuthUser } from './auth-user';
import { AuthService } from './auth.service';

/** `Authorization: Basic` on execute, checked against the same users. */
@Injectable()
export class BasicStrategy extends PassportStrategy(Strategy, 'basic') {
  constructor(private readonly auth: AuthService) {
    super();
  }

  async validate(username: string, password: string): Promise<AuthUser | false> {
    return (await this.auth.userFromPassword(username, password)) ?? false;
  }
}
