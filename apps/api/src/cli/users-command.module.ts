import { DynamicModule, Global, Inject, Module, OnApplicationShutdown } from '@nestjs/common';
import type { Pool } from 'pg';
import { ConfigModule, SluiceConfig, isStandalone } from '@app/config';
import { METADATA_POOL, QUERIES_OF_USER, QueriesOfUser, UserAdminModule } from '@app/users';
import { InfraModule, metadataPool } from '../infra/infra.module';
import { QueriesService } from '../queries/queries.service';

/**
 * The api's QueriesService over the api's connections (InfraModule): a user deleted by `sluice
 * users remove` is forgotten (records, slots, Idempotency-Keys, kept results) as DELETE
 * /v1/users forgets them, whether or not an api is running to hear of it.
 */
@Module({
  providers: [QueriesService, { provide: QUERIES_OF_USER, useExisting: QueriesService }],
  exports: [QUERIES_OF_USER],
})
class SharedQueriesModule {}

/**
 * Standalone mode: the queries are in the memory of the api that runs them, which ends a changed
 * user's as it hears the change (UserChangeWatcher); with no api running there are none.
 */
const heardByTheApi: QueriesOfUser = {
  forgetUser: () => Promise.resolve(),
  roleChanged: () => Promise.resolve(),
};

@Global()
@Module({
  providers: [metadataPool, { provide: QUERIES_OF_USER, useValue: heardByTheApi }],
  exports: [METADATA_POOL, QUERIES_OF_USER],
})
class StandaloneMetadataModule implements OnApplicationShutdown {
  constructor(@Inject(METADATA_POOL) private readonly pool: Pool) {}

  async onApplicationShutdown(): Promise<void> {
    // Fails only when already ended.
    await this.pool.end().catch(() => undefined);
  }
}

/**
 * What `sluice users …` runs in: UserAdminModule, as the api builds it, over the api's own
 * connections in cluster mode (InfraModule: the metadata database, Redis and the queue).
 */
@Module({})
export class UsersCommandModule {
  static forRoot(config: SluiceConfig): DynamicModule {
    const standalone = isStandalone(config);
    return {
      module: UsersCommandModule,
      imports: [
        ConfigModule.forRoot(config),
        ...(standalone
          ? [StandaloneMetadataModule, UserAdminModule.withQueries(StandaloneMetadataModule)]
          : [InfraModule.forRoot(config), UserAdminModule.withQueries(SharedQueriesModule)]),
      ],
    };
  }
}
