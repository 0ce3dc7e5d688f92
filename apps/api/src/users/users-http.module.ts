import { Module } from '@nestjs/common';
import { UserAdminModule } from '@app/users';
import { AuthModule } from '../auth/auth.module';
import { QueriesModule } from '../queries/queries.module';
import { UsersController } from './users.controller';

/** POST/GET/PATCH/DELETE /v1/users. */
@Module({
  // QueriesModule: a deleted user's queries, kept results and idempotency keys go with them.
  imports: [AuthModule, UserAdminModule.withQueries(QueriesModule)],
  controllers: [UsersController],
})
export class UsersHttpModule {}
