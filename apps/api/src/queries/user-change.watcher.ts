import { Inject, Injectable, Logger, OnApplicationBootstrap, OnModuleInit } from '@nestjs/common';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import {
  MetadataEvent,
  MetadataEventListener,
  MetadataEventsService,
  UsersService,
} from '@app/users';
import { QueriesService } from './queries.service';

/** Users checked at once: each check is a few Redis commands, and a read of the users table. */
export const CHECKS_AT_ONCE = 4;
/** Names heard of and not yet checked, at most: past it, notices are dropped (and logged). */
export const MOST_WAITING = 10_000;

/**
 * Forgets a user deleted, and ends the queries of a user changed, in another process: the api
 * that deletes a user or changes their role does it itself, but `sluice users remove` and `sluice
 * users set --role` reach only the users table, and the NOTIFY it sends. Every api hears it; what
 * each then forgets or ends is read from the table and the query records
 * (QueriesService.userChanged), so a notice sent twice, or by anyone, ends nothing that should
 * run. Service users only: a database user is a PostgreSQL role, changed in PostgreSQL.
 *
 * Anyone who can run a statement on the metadata database can NOTIFY (any Sluice user, when it
 * is also a database they query): one `select pg_notify(…) from generate_series(…)` sends
 * millions of notices of as many names. They are checked CHECKS_AT_ONCE at a time, each name
 * once however often it is heard while it waits, and at most MOST_WAITING wait: a check for
 * every notice at once held the api's memory and the metadata pool (logins stalled) for as long
 * as they took.
 */
@Injectable()
export class UserChangeWatcher
  implements OnModuleInit, OnApplicationBootstrap, MetadataEventListener
{
  private readonly logger = new Logger(UserChangeWatcher.name);
  private readonly waiting = new Set<string>();
  /** Names being checked: one heard of again waits for its check to end. */
  private readonly checking = new Set<string>();
  private dropped = 0;

  constructor(
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
    private readonly events: MetadataEventsService,
    private readonly users: UsersService,
    private readonly queries: QueriesService,
  ) {}

  onModuleInit(): void {
    if (this.config.authMode === 'service') this.events.subscribe(this);
  }

  /** Changes made while no api was listening: the users with queries under way or kept are checked. */
  onApplicationBootstrap(): void {
    if (this.config.authMode === 'service') this.onMetadataResync();
  }

  onMetadataEvent(event: MetadataEvent): void {
    if (event.kind === 'user') this.hear(event.username);
  }

  /**
   * Notices may have been missed (the listening connection was down): the owners of every query
   * under way, and every user who may have a result kept, are checked. A kept result of a role
   * its user no longer has would otherwise stay theirs to fetch until its TTL.
   */
  onMetadataResync(): void {
    this.queries.ownersToCheck().then(
      (owners) => owners.forEach((owner) => this.hear(owner)),
      (err: Error) => this.logger.warn(`could not check the users of the queries: ${err.message}`),
    );
  }

  private hear(username: string): void {
    if (!this.waiting.has(username)) {
      if (this.waiting.size >= MOST_WAITING) {
        if (this.dropped++ === 0) {
          this.logger.warn(
            `more than ${MOST_WAITING} users changed, waiting to be checked: dropping notices`,
          );
        }
        return;
      }
      // Heard again while being checked: checked again after, with what the table says then.
      this.waiting.add(username);
    }
    this.next();
  }

  private next(): void {
    while (this.checking.size < CHECKS_AT_ONCE) {
      let username: string | undefined;
      // At most CHECKS_AT_ONCE names are passed over: those being checked.
      for (const name of this.waiting) {
        if (!this.checking.has(name)) {
          username = name;
          break;
        }
      }
      if (username === undefined) return;
      this.waiting.delete(username);
      this.checking.add(username);
      const checked = username;
      this.changed(username)
        .catch((err: Error) => {
          // What it would have ended goes on as if nobody had heard of the change.
          this.logger.warn(`user ${checked} changed; could not end their queries: ${err.message}`);
        })
        .finally(() => {
          this.checking.delete(checked);
          if (this.waiting.size === 0 && this.dropped > 0) {
            this.logger.warn(`${this.dropped} notices of changed users were dropped`);
            this.dropped = 0;
          }
          this.next();
        });
    }
  }

  private async changed(username: string): Promise<void> {
    await this.queries.userChanged(username, async () => {
      this.users.forget(username);
      const user = await this.users.find(username);
      return user && { userId: user.userId, role: user.role };
    });
  }
}
