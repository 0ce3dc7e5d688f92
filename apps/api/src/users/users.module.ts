import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { QueriesModule } from '../queries/queries.module';
import { UserAdminService } from './user-admin.service';
import { UsersController } from './users.controller';

/** POST/GET/PATCH/DELETE /v1/users. */
@Module({
  // QueriesModule: a deleted user's queries, kept results and idempotency keys go with them.
  imports: [AuthModule, QueriesModule],
  controllers: [UsersController],
  providers: [UserAdminService],
})
export class UsersModule {}
