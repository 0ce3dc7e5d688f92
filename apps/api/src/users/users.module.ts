import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { UserAdminService } from './user-admin.service';
import { UsersController } from './users.controller';

/** POST/GET/PATCH/DELETE /v1/users. */
@Module({
  imports: [AuthModule],
  controllers: [UsersController],
  providers: [UserAdminService],
})
export class UsersModule {}
