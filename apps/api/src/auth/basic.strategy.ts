import { Injectable } from '@nestjs/common';
import { PassportStrategy } from '@nestjs/passport';
import { parse } from 'basic-auth';
import type { IncomingMessage } from 'node:http';
import type { FastifyRequest } from 'fastify';
import { Strategy } from 'passport-strategy';
import { AuthUser } from './auth-user';
import { AuthService } from './auth.service';

type Done = (err: unknown, user?: AuthUser | null) => void;
type Verify = (request: FastifyRequest, username: string, password: string, done: Done) => void;

/**
 * `Authorization: Basic` as RFC 7617 has it (parsed by `basic-auth`): the user id ends at the
 * first colon, so a password may hold colons — passport-http split at every one.
 */
class BasicCredentialsStrategy extends Strategy {
  constructor(private readonly verify: Verify) {
    super();
  }

  // Typed as passport's (Express) request; under Fastify, Nest hands it the Fastify request.
  override authenticate(request: IncomingMessage): void {
    const header = request.headers.authorization;
    const credentials = typeof header === 'string' ? parse(header) : undefined;
    if (!credentials?.name || !credentials.pass) return this.fail(401);
    this.verify(
      request as unknown as FastifyRequest,
      credentials.name,
      credentials.pass,
      (err, user) => {
        if (err) this.error(err as Error);
        else if (user) this.success(user);
        else this.fail(401);
      },
    );
  }
}

/** `Authorization: Basic` on execute, checked (and throttled) like a login. */
@Injectable()
export class BasicStrategy extends PassportStrategy(BasicCredentialsStrategy, 'basic') {
  constructor(private readonly auth: AuthService) {
    super();
  }

  validate(request: FastifyRequest, username: string, password: string): Promise<AuthUser> {
    return this.auth.userFromPassword(username, password, request.ip);
  }
}
