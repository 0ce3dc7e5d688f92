import { ExecutionContext, Injectable } from '@nestjs/common';
import { AuthGuard } from '@nestjs/passport';
import type { FastifyRequest } from 'fastify';
import { SluiceError } from '@app/contracts';
import { authorizationProblem } from '../http/request.checks';
import { challenge } from './auth.challenge';

/** The schemes passport's strategies take, in the order it tries them. */
const SCHEMES = ['bearer', 'basic'];

/**
 * Accepts `Authorization: Bearer <token>` (BearerStrategy) or `Basic <credentials>`
 * (BasicStrategy), through passport; anything else is 401, and a header holding more than one
 * credential is 400 (the header checks refuse it first; this is the guard's own line, for
 * whatever route is mounted without them).
 */
@Injectable()
export class CredentialsGuard extends AuthGuard(SCHEMES) {
  override canActivate(context: ExecutionContext): Promise<boolean> {
    const header = context.switchToHttp().getRequest<FastifyRequest>().headers.authorization;
    const problem = typeof header === 'string' ? authorizationProblem(header) : undefined;
    if (problem) throw new SluiceError('INVALID_REQUEST', problem);
    const scheme = typeof header === 'string' ? header.split(' ', 1)[0].toLowerCase() : '';
    if (!SCHEMES.includes(scheme)) {
      throw new SluiceError(
        'AUTH_REQUIRED',
        header ? 'unsupported authorization scheme' : 'missing Authorization header',
        undefined,
        challenge(),
      );
    }
    return super.canActivate(context) as Promise<boolean>;
  }

  /**
   * A refused token or a failure to check (e.g. the metadata database is down) comes as the
   * strategy's error, with its reason; only Basic credentials that do not match come as no user.
   */
  override handleRequest<T>(err: unknown, user: T): T {
    if (err) throw err as Error;
    if (user) return user;
    throw new SluiceError(
      'BAD_CREDENTIALS',
      'invalid username or password',
      undefined,
      challenge(),
    );
  }
}
