import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import {
  MetadataEvent,
  MetadataEventListener,
  MetadataEventsService,
} from '../auth/metadata-events.service';
import { UsersService } from '../auth/users.service';
import { QueriesService } from './queries.service';

/**
 * Ends the queries of a user changed in another process: the api that deletes a user or changes
 * their role ends what they had under way itself, but `sluice users remove` and `sluice users set
 * --role` reach only the users table, and the NOTIFY it sends. Every api hears it; what each then
 * ends is read from the table and the query records (QueriesService.userChanged), so a notice
 * sent twice, or by anyone, ends nothing that should run. Service users only: a database user
 * is a PostgreSQL role, changed in PostgreSQL.
 */
@Injectable()
export class UserChangeWatcher implements OnModuleInit, MetadataEventListener {
  private readonly logger = new Logger(UserChangeWatcher.name);

  constructor(
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
    private readonly events: MetadataEventsService,
    private readonly users: UsersService,
    private readonly queries: QueriesService,
  ) {}

  onModuleInit(): void {
    if (this.config.authMode === 'service') this.events.subscribe(this);
  }

  onMetadataEvent(event: MetadataEvent): void {
    if (event.kind !== 'user') return;
    this.changed(event.username).catch((err: Error) => {
      // What it would have ended goes on as if nobody had heard of the change.
      this.logger.warn(
        `user ${event.username} changed; could not end their queries: ${err.message}`,
      );
    });
  }

  /** Missed notices are not replayed: what they would have ended lapses by its TTL. */
  onMetadataResync(): void {}

  private async changed(username: string): Promise<void> {
    this.users.forget(username);
    const user = await this.users.find(username);
    await this.queries.userChanged(username, user && { userId: user.userId, role: user.role });
  }
}
