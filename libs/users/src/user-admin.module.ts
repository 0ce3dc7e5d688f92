import { DynamicModule, Module, Type } from '@nestjs/common';
import { UserAdminService } from './user-admin.service';
import { UsersModule } from './users.module';

/**
 * UserAdminService, as the api's /v1/users and `sluice users` both get it: `queries` is the
 * module that exports QUERIES_OF_USER (the api's QueriesService in both), so that a user deleted
 * either way is forgotten by the one deleting them.
 */
@Module({})
export class UserAdminModule {
  static withQueries(queries: Type | DynamicModule): DynamicModule {
    return {
      module: UserAdminModule,
      imports: [UsersModule, queries],
      providers: [UserAdminService],
      exports: [UserAdminService],
    };
  }
}
