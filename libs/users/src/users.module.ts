import { Module } from '@nestjs/common';
import { MetadataEventsService } from './metadata-events.service';
import { MetadataSchema } from './metadata.schema';
import { RoleCatalogService } from './role-catalog.service';
import { UsersService } from './users.service';

/**
 * The service's users on the metadata database: their table, its change notices, the roles
 * they run as. Needs METADATA_POOL and SLUICE_CONFIG from global modules.
 */
@Module({
  providers: [MetadataSchema, MetadataEventsService, RoleCatalogService, UsersService],
  exports: [MetadataSchema, MetadataEventsService, RoleCatalogService, UsersService],
})
export class UsersModule {}
