import type { RedisSettings, SpoolSettings } from '@app/config';
/** What every piscina thread is told at start-up (piscina's workerData); plain data. */
export interface ThreadSettings {
  databaseUrl: string;
  /**
   * Sluice's own logins: DATABASE_URL's and SLUICE_METADATA_DATABASE_URL's users. A database user
   * who becomes (a member of) one may run nothing more.
   */
  ownLogins: string[];
  /** Where result streams go (cluster mode); each thread makes its own connection from it. */
  redis?: RedisSettings;
  keyPrefix: string;
  /** Where kept results' bodies go (SLUICE_SPOOL_URL); each thread opens the store itself. */
  spool?: SpoolSettings;
  pgPoolSize: number;
  /** Statement connections one thread may hold (the process's cap shared out). */
  pgMaxConnectionsPerThread: number;
  /** Secret the login roles' names and passwords, and statements' application_name, derive from. */
  credentialKey: string;
  /** One Int32 shared by all threads: statement connections open. */
  connectionCounts: SharedArrayBuffer;
  /** One Int32 shared by all threads: full collections they ran once idle (IdleCollection). */
  idleCollections: SharedArrayBuffer;
  defaultFetchSize: number;
  windowChunks: number;
  windowBytes: number;
  maxEntryBytes: number;
  streamTtlSeconds: number;
  /** How long a query's record is kept after its end (the end is recorded from the thread). */
  jobRetentionSeconds: number;
  pgConnectTimeoutMs: number;
  clientIdleTimeoutMs: number;
  /** How often a running query looks for its cancel in Redis (cluster mode; standalone is told). */
  cancelPollMs: number;
  /** The nice value the thread lowers itself to at start (0: it keeps its maker's). */
  nice: number;
  /** One BigInt64 shared by all threads of the process: when an interactive statement last started (ms). */
  lastInteractive: SharedArrayBuffer;
  /** One BigInt64 shared with the in-process result channel: bytes all kept results hold (standalone). */
  keptBytes: SharedArrayBuffer;
  /** How long an export waits before its next batch while interactive statements run (ms). */
  exportYieldMs: number;
}
