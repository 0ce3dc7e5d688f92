import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { SluiceError } from '@app/contracts';
import { AuthUser } from './auth-user';

/** After CredentialsGuard: only administrators pass (the flag as stored now, not in the token). */
@Injectable()
export class AdminGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const { user } = context.switchToHttp().getRequest<FastifyRequest & { user?: AuthUser }>();
    if (!user?.isAdmin) throw new SluiceError('FORBIDDEN', 'only administrators may manage users');
    return true;
  }
}
