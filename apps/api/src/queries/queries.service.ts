import { Inject, Injectable } from '@nestjs/common';
import {
  FINAL_STATES,
  QueryInfo,
  SluiceError,
  Status,
  statusOf,
  withheldReason,
} from '@app/contracts';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { QueryLifecycle } from '@app/execution';
import {
  JobQueue,
  QueryRecord,
  QueryRegistry,
  ResultSink,
  ResultSource,
  UserQueries,
  statementPreview,
} from '@app/transport';
import { AuthUser } from '../auth/auth-user';
import { JOB_QUEUE, QUERY_REGISTRY, RESULT_SINK, RESULT_SOURCE } from '../infra/tokens';
import { ownsQuery } from './query.owner';

const LIST_LIMIT = 500;

/** Queries as users see them: their own (admins: everyone's), with cancel. */
@Injectable()
export class QueriesService {
  constructor(
    @Inject(QUERY_REGISTRY) private readonly registry: QueryRegistry,
    @Inject(JOB_QUEUE) private readonly queue: JobQueue,
    @Inject(RESULT_SOURCE) private readonly results: ResultSource,
    @Inject(RESULT_SINK) private readonly sink: ResultSink,
    private readonly lifecycle: QueryLifecycle,
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
  ) {}

  async list(user: AuthUser): Promise<QueryInfo[]> {
    // Under way: everyone's from the queue for an administrator; a user's own are the ones
    // holding a slot of theirs (at most SLUICE_MAX_ACTIVE_PER_USER, not everyone's to filter).
    const [records, open] = await Promise.all([
      this.registry.list(LIST_LIMIT, user.isAdmin ? undefined : user.username),
      user.isAdmin
        ? this.queue.openIds(LIST_LIMIT)
        : this.registry.queriesOf(user.username).then((mine) => mine.open),
    ]);
    // Every query under way, however many were sent since: the newest LIST_LIMIT alone let a
    // user push a running query out of an administrator's list by sending quick ones after it.
    const listed = new Set(records.map((r) => r.queryId));
    const older = await Promise.all(
      open.filter((id) => !listed.has(id)).map((id) => this.registry.get(id)),
    );
    const all = [...records, ...older.filter((r): r is QueryRecord => r !== undefined)];
    // The index is by name: a deleted user's of the same name may linger there until purged.
    const mine = user.isAdmin ? all : all.filter((r) => ownsQuery(user, r));
    mine.sort((a, b) => b.createdAt - a.createdAt);
    // A list shows each statement's preview (records read one by one hold it whole).
    return Promise.all(
      mine.map((r) => this.info({ ...r, statement: statementPreview(r.statement) }, user)),
    );
  }

  async get(queryId: string, user: AuthUser): Promise<QueryInfo> {
    return this.info(await this.visible(queryId, user), user);
  }

  /**
   * The record of a query of this user's own, for its kept result (404 otherwise): an
   * administrator sees other users' queries, never their data.
   */
  ownRecord(queryId: string, user: AuthUser): Promise<QueryRecord> {
    return this.visible(queryId, { ...user, isAdmin: false });
  }

  /** Cancels a query: a queued one never runs, a running one is stopped in PostgreSQL. */
  async cancel(queryId: string, user: AuthUser): Promise<QueryInfo> {
    const record = await this.visible(queryId, user);
    if (FINAL_STATES.includes(record.state)) {
      // What a query keeps goes with the cancel: a finished one's result is dropped now.
      if (record.kept) await this.results.dropKept(queryId);
      return this.info(record, user);
    }
    const status = statusOf('CANCELLED', `cancelled by ${user.username}`);
    if (await this.queue.removeQueued(queryId)) {
      // Nobody will run it: end its channel so that the waiting client gets the status.
      await this.sink.end(queryId, { kind: 'error', status });
      await this.lifecycle.transition({ queryId, owner: record.owner }, 'cancelled', { status });
    } else {
      await this.results.cancel(queryId);
    }
    // Dropped after the cancel is sent: in-process, the cancel goes through the kept channel.
    if (record.kept) await this.results.dropKept(queryId);
    return this.info((await this.registry.get(queryId)) ?? record, user);
  }

  /**
   * Forgets everything of a deleted user's (see QueryRegistry.forgetUser), and ends what they
   * had under way (see endQueries).
   */
  async forgetUser(username: string): Promise<void> {
    const queries = await this.registry.forgetUser(username);
    await this.endQueries(username, queries, `user ${username} was deleted`);
  }

  /**
   * A user's role changed: what they queued or ran as the old role, and the results they kept
   * of it, are not theirs under the new one (see endQueries). Their records stay.
   */
  async roleChanged(username: string): Promise<void> {
    const queries = await this.registry.queriesOf(username);
    await this.endQueries(username, queries, `the role of user ${username} changed`);
  }

  /**
   * Everyone a missed change of user could leave with something that is no longer theirs: the
   * owners of the queries under way (queued or running), and the users who may have results kept.
   */
  async ownersToCheck(): Promise<string[]> {
    const [ids, keeping] = await Promise.all([
      this.queue.openIds(LIST_LIMIT),
      this.registry.keptOwners(),
    ]);
    const records = await Promise.all(ids.map((id) => this.registry.get(id)));
    return [...new Set([...records.flatMap((r) => (r ? [r.owner] : [])), ...keeping])];
  }

  /**
   * A user was changed somewhere else (another api, or the `sluice users` command, which reaches
   * no queue): `now` is what the users table says of them (undefined: gone). A user gone is
   * forgotten as the api's own delete forgets them (forgetUser: records, slots, Idempotency-Keys),
   * and what they had under way ends. Otherwise it ends what they have under way that is no
   * longer theirs as they are now: everything of another user id (deleted and made again), and
   * what was queued as another role. Read from the table and the records, not from the change's
   * notice, so that a notice anyone could send ends nothing that should run.
   */
  async userChanged(
    username: string,
    read: () => Promise<{ userId: string; role: string } | undefined>,
  ): Promise<void> {
    const now = await read();
    if (!now) return this.forgetUser(username);
    const { open, kept } = await this.registry.queriesOf(username);
    if (open.length === 0 && kept.length === 0) return;
    const gone = (r: QueryRecord) => r.ownerId !== undefined && r.ownerId !== now.userId;
    const moved = (r: QueryRecord) => !gone(r) && r.role !== undefined && r.role !== now.role;
    const records = async (ids: string[]) =>
      (await Promise.all(ids.map((id) => this.registry.get(id)))).filter(
        (r): r is QueryRecord => r !== undefined,
      );
    const [opened, kepts] = await Promise.all([records(open), records(kept)]);
    const those = (stale: (r: QueryRecord) => boolean): UserQueries => ({
      open: opened.filter(stale).map((r) => r.queryId),
      kept: kepts.filter(stale).map((r) => r.queryId),
    });
    await this.endQueries(username, those(gone), `user ${username} was deleted`);
    await this.endQueries(username, those(moved), `the role of user ${username} changed`);
  }

  /**
   * Queued queries never run, running ones are stopped (each would run as the role it was queued
   * with), and kept results go with the bytes they hold.
   */
  private async endQueries(owner: string, { open, kept }: UserQueries, why: string): Promise<void> {
    const status = statusOf('CANCELLED', `cancelled: ${why}`);
    await Promise.all(
      open.map(async (queryId) => {
        // Not queued (or not known): it may be running, so the cancel covers it.
        if (!(await this.queue.removeQueued(queryId))) return this.results.cancel(queryId);
        await this.sink.end(queryId, { kind: 'error', status });
        await this.lifecycle.transition({ queryId, owner }, 'cancelled', { status });
      }),
    );
    // Dropped after the cancels are sent: in-process, a cancel goes through the kept channel.
    await Promise.all(kept.map((queryId) => this.results.dropKept(queryId)));
  }

  /** The query, if this user may see it; 404 otherwise (another user's query does not exist for you). */
  private async visible(queryId: string, user: AuthUser): Promise<QueryRecord> {
    const record = /^[0-9a-f-]{36}$/i.test(queryId) ? await this.registry.get(queryId) : undefined;
    if (!record || (!user.isAdmin && !ownsQuery(user, record))) {
      throw new SluiceError('NOT_FOUND', `no query ${queryId}`);
    }
    return record;
  }

  /** The query as `viewer` sees it (see statusFor). */
  private async info(record: QueryRecord, viewer: AuthUser): Promise<QueryInfo> {
    const position =
      record.state === 'queued' ? await this.queue.position(record.queryId) : undefined;
    const iso = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString());
    return {
      query_id: record.queryId,
      owner: record.owner,
      state: record.state,
      database: record.database ?? null,
      format: record.format,
      lane: record.lane ?? 'interactive',
      statement: record.statement,
      created_at: new Date(record.createdAt).toISOString(),
      started_at: iso(record.startedAt),
      streaming_at: iso(record.streamingAt),
      finished_at: iso(record.finishedAt),
      elapsed_ms: (record.finishedAt ?? Date.now()) - record.createdAt,
      queue_position: position ?? null,
      rows: record.rows,
      bytes: record.bytes,
      ...produced(record),
      status: statusFor(record, viewer),
      result_url: record.kept ? `/v1/queries/${record.queryId}/result` : null,
      result_kept_until:
        record.kept && record.finishedAt !== undefined
          ? new Date(record.finishedAt + this.config.resultTtlSeconds * 1000).toISOString()
          : null,
      // Standalone mode always spools: a kept result not spooled is in Redis.
      result_kept_in: !record.kept ? null : record.spooled ? 'spool' : 'redis',
      trace_id: record.traceId ?? null,
    };
  }
}

/**
 * The final status as `viewer` sees it. An administrator sees other users' queries but never
 * their parameter values (the statement shows its placeholders, the queue dashboard redacts the
 * job's values), and a failure's reason may quote them: PostgreSQL's own messages do (a failed
 * cast, an enum or date input), normalised as often as not, and a statement may pass a value
 * through any function into a RAISE. So the reason of a failed query with bound values is shown
 * whole to its owner only, and to others as its kind of error (withheldReason). A query without
 * values keeps its reason: the statement, which administrators see, holds every literal.
 */
function statusFor(record: QueryRecord, viewer: AuthUser): Status | null {
  if (!record.status) return null;
  if (ownsQuery(viewer, record) || record.boundValues === 0) return record.status;
  return withheldReason(record.status);
}

/**
 * What the producer made. Ended: at least what was sent (the api may have recorded the end before
 * the worker's own report, which then changes nothing).
 */
function produced(record: QueryRecord): { rows_produced: number; bytes_produced: number } {
  const rows = record.rowsProduced ?? 0;
  const bytes = record.bytesProduced ?? 0;
  if (!FINAL_STATES.includes(record.state)) return { rows_produced: rows, bytes_produced: bytes };
  return {
    rows_produced: Math.max(rows, record.rows),
    bytes_produced: Math.max(bytes, record.bytes),
  };
}
