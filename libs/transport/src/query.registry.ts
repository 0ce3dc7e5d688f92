import { Lane, QueryState, Status } from '@app/contracts';

/**
 * How long a user's query slot lasts without renewal by default (ms; SLUICE_SLOT_LEASE_MS). Its
 * holders (the api reading the query, the worker running it) renew it three times a lease, so a
 * release that failed (a Redis blip) or a holder that died costs its owner the slot for this
 * long, not a day.
 */
export const SLOT_LEASE_MS = 15_000;

/** Characters of a statement that a list of queries shows (QueryRegistry.list). */
export const STATEMENT_PREVIEW_CHARS = 200;

/** What a list shows of a statement: its first STATEMENT_PREVIEW_CHARS characters. */
export function statementPreview(statement: string): string {
  return statement.length <= STATEMENT_PREVIEW_CHARS
    ? statement
    : statement.slice(0, STATEMENT_PREVIEW_CHARS);
}

/**
 * What a query's record holds of its statement: all of it, or its first `maxBytes` bytes of
 * UTF-8 cut at the end of a character (SLUICE_RECORD_STATEMENT_BYTES), so that no user can make
 * the registry hold megabytes a record.
 */
export function recordedStatement(statement: string, maxBytes: number): string {
  if (statement.length * 3 <= maxBytes) return statement;
  const bytes = new Uint8Array(maxBytes);
  // encodeInto writes whole characters only, and says how much of the text they are.
  const { read } = new TextEncoder().encodeInto(statement, bytes);
  return read === statement.length ? statement : statement.slice(0, read);
}

/** What the registry keeps of a query; times in epoch ms. */
export interface QueryRecord {
  queryId: string;
  owner: string;
  /**
   * The id its owner was created with (AuthUser.userId), where users have one: a user
   * re-created under the owner's name is someone else, and never sees this query.
   */
  ownerId?: string;
  /**
   * The PostgreSQL role it runs as (ExecuteJobData.role); absent in records written before it was
   * kept. A query of a role its owner no longer has is ended (QueriesService.userChanged).
   */
  role?: string;
  state: QueryState;
  database?: string;
  format: string;
  /** Absent in records written before lanes: those waited in today's interactive queue. */
  lane?: Lane;
  /**
   * Its statement's text, placeholders as written (never a parameter's value), as recorded
   * (recordedStatement); lists give its first STATEMENT_PREVIEW_CHARS characters.
   */
  statement: string;
  /**
   * How many parameter values were bound to its statement: with any, its failure's reason is
   * shown to its owner only (withheldReason). Absent in records written before it was kept, which
   * are treated as having some.
   */
  boundValues?: number;
  /** The body's Content-Encoding, when compressed. */
  encoding?: string;
  /** Its result is kept to be fetched (GET /v1/queries/{id}/result) until its TTL ends. */
  kept?: boolean;
  /** Its kept result's body is in the spool (SLUICE_SPOOL_URL), its channel holding the list. */
  spooled?: boolean;
  createdAt: number;
  startedAt?: number;
  /**
   * When its statement's first rows came back and went to the result channel: from then on it
   * streams. Its producer says so in its progress reports and with its end.
   */
  streamingAt?: number;
  finishedAt?: number;
  /** Rows and body bytes sent to a client. */
  rows: number;
  bytes: number;
  /** Rows and body bytes its producer has made, as it last said (now and then while it runs). */
  rowsProduced?: number;
  bytesProduced?: number;
  status?: Status;
  /** Its trace's id, when tracing is on and the request was sampled. */
  traceId?: string;
}

/** What a producer has made of a query's result so far, and since when it streams (if it does). */
export interface Produced {
  rows: number;
  bytes: number;
  streamingAt?: number;
}

/** Which query an idempotency key stands for, and a digest of the request that claimed it. */
export interface IdempotencyClaim {
  queryId: string;
  fingerprint: string;
}

/** How long an idempotency key's claim lasts, and how many live claims one owner may hold. */
export interface KeyLimits {
  ttlSeconds: number;
  most: number;
}

/**
 * What claiming an idempotency key came to: the key is the new query's; it was claimed already
 * (the claim it holds); or its owner holds `most` live claims, the oldest lapsing in `freeInMs`.
 */
export type KeyClaim =
  | { outcome: 'claimed' }
  | { outcome: 'held'; claim: IdempotencyClaim }
  | { outcome: 'full'; freeInMs: number };

/** A user's queued and running queries, and their kept results. */
export interface UserQueries {
  /** Queries that held a slot of the user's: queued or running, to be cancelled. */
  open: string[];
  /** Queries whose results were kept, to be dropped with the bytes they hold. */
  kept: string[];
}

/** What a transition may record besides the state. */
export type QueryFacts = Partial<
  Pick<
    QueryRecord,
    'startedAt' | 'streamingAt' | 'rows' | 'bytes' | 'rowsProduced' | 'bytesProduced' | 'status'
  >
>;

/**
 * How long, and how many, finished queries' records the registry keeps (SLUICE_JOB_RETENTION_SECONDS,
 * SLUICE_QUERY_RETENTION_COUNT and SLUICE_RESULT_RETENTION_COUNT): none longer than `seconds`;
 * beyond the newest `count` of each user's queries whose results are not kept, only the open ones;
 * and beyond the newest `keptCount` of each user's queries with kept results, only the open ones —
 * a finished one goes with its result. Each user's are counted apart: nobody's queries push out
 * another's.
 */
export interface RecordRetention {
  seconds: number;
  /** Per user. */
  count: number;
  /** Absent: kept results go by their time only (a registry that never trims: a worker's). */
  keptCount?: number;
  /** How often (ms) the index of everyone's queries and the kept results are trimmed. */
  trimEveryMs?: number;
}

/**
 * Queries' records: what `/v1/queries` shows, each moved through QUERY_TRANSITIONS by whoever
 * writes it (QueryLifecycle's callers, and a producer's end with its result's last entry).
 */
export interface QueryRecords {
  /** A new query, queued. */
  create(record: QueryRecord): Promise<void>;
  /**
   * Removes the record of a query of `owner`'s that was refused before it was queued (or was a
   * repeat of an idempotency key's): it never was one.
   */
  discard(queryId: string, owner: string): Promise<void>;
  /**
   * Moves a query to `to` with what is known of it then, in one step, if QUERY_TRANSITIONS allows
   * it from the state the query is in (else nothing changes: of two processes ending a query, the
   * first wins). A final state also stamps `finishedAt` and starts the record's retention. Returns
   * the record as it is afterwards, whoever moved it; undefined if there is none.
   */
  transition(queryId: string, to: QueryState, facts?: QueryFacts): Promise<QueryRecord | undefined>;
  /** As transition(), the record not read back: a writer that does not look at it spares that. */
  move(queryId: string, to: QueryState, facts?: QueryFacts): Promise<void>;
  /**
   * Records what the producer of a running query has made so far (and when it began streaming,
   * when it says); nothing once the query ended (or when there is no record). Not a transition:
   * the state stays as it is.
   */
  progress(queryId: string, produced: Produced): Promise<void>;
  get(queryId: string): Promise<QueryRecord | undefined>;
  /**
   * The newest `limit` queries of `owner`, or of everyone; most recent first. Each statement is
   * its preview (statementPreview): a list need not carry every statement whole.
   */
  list(limit: number, owner?: string): Promise<QueryRecord[]>;
  /**
   * Users who may have results kept: each who made a query whose result is kept, in the last day
   * (past the longest a result is kept), whether or not it is still there.
   */
  keptOwners(): Promise<string[]>;
}

/**
 * Each user's queued-and-running queries, counted against SLUICE_MAX_ACTIVE_PER_USER. Where the
 * count is shared between processes (Redis), a slot is a lease: it lapses unless renewed.
 */
export interface QuerySlots {
  /**
   * Counts a new query against its owner's queued-and-running cap: returns how many the owner
   * had before, or undefined (and does not count it) when the cap is reached.
   */
  admit(owner: string, queryId: string, cap: number): Promise<number | undefined>;
  /**
   * How long a slot is held past its last renewal (ms; SLUICE_SLOT_LEASE_MS): holders renew it
   * three times a lease. Where nothing is shared (in one process), renewing does nothing.
   */
  readonly slotLeaseMs: number;
  /**
   * Keeps a query's slot while the query lives, for one lease from now (or `leaseMs`, to hold it
   * through a known wait); does nothing once the slot is released.
   */
  renew(owner: string, queryId: string, leaseMs?: number): Promise<void>;
  /** Stops counting a query against its owner. */
  release(owner: string, queryId: string): Promise<void>;
}

/** An Idempotency-Key as a user sent it: the same text is another key for another user. */
export interface UserKey {
  owner: string;
  key: string;
}

/** Idempotency-Key claims, per user. */
export interface IdempotencyKeys {
  /**
   * Claims an owner's idempotency key for `claim` (its query and the request's fingerprint) for
   * `limits.ttlSeconds`, unless the key is claimed already (then answers that claim) or the owner
   * holds `limits.most` live claims: then changes nothing. A claim is never dropped before its TTL
   * (a repeat of its key would run its statement again), so the count refuses new ones instead.
   */
  claimKey(userKey: UserKey, claim: IdempotencyClaim, limits: KeyLimits): Promise<KeyClaim>;
  /** Lets go of an idempotency key whose request was refused before its query was queued. */
  releaseKey(userKey: UserKey): Promise<void>;
}

/**
 * The registry: records, slots and keys together, for the callers that need more than one (a
 * user's deletion, the retention trim). Each concern is also a port of its own above; a caller
 * that needs one is given that one.
 */
export interface QueryRegistry extends QueryRecords, QuerySlots, IdempotencyKeys {
  /**
   * Forgets the records of finished queries past the retention's count (see RecordRetention).
   * The api trims on a timer of its own (startTrimming); this trims now.
   */
  trim(): Promise<void>;
  /**
   * Trims every RecordRetention.trimEveryMs from now until close(): called once, by the process
   * that serves the listings (the api). A registry that is never started trims only when asked.
   */
  startTrimming(): void;
  /**
   * Forgets everything of the user named `owner` (who was deleted): the records of their queries,
   * their slots and their idempotency keys, so that nothing of theirs reaches a later user of the
   * name. Their queries still open, and their kept results, are the caller's to cancel and drop.
   */
  forgetUser(owner: string): Promise<UserQueries>;
  /** The queries of `owner`'s that are queued or running, and those whose results are kept. */
  queriesOf(owner: string): Promise<UserQueries>;
  /** Stops trimming, and waits for a trim under way: the connection may be closed next. */
  close(): Promise<void>;
}
