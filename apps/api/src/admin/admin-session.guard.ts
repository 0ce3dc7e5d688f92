import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { AuthUser } from '../auth/auth-user';
import { AdminAuthenticatorService } from './admin-authenticator.service';

/**
 * The admin pages' data routes: the admin cookie (or, from other clients, Bearer or Basic), as
 * AdminAuthenticatorService takes them; attaches the user for @CurrentUser().
 */
@Injectable()
export class AdminSessionGuard implements CanActivate {
  constructor(private readonly authenticator: AdminAuthenticatorService) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const request = context.switchToHttp().getRequest<FastifyRequest & { user?: AuthUser }>();
    request.user = await this.authenticator.user(request);
    return true;
  }
}
