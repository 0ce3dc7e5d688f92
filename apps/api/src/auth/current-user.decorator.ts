import { ExecutionContext, createParamDecorator } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { AuthUser } from './auth-user';

/** The user the CredentialsGuard attached to the request. */
export const CurrentUser = createParamDecorator(
  (_: unknown, context: ExecutionContext): AuthUser =>
    context.switchToHttp().getRequest<FastifyRequest & { user: AuthUser }>().user,
);
