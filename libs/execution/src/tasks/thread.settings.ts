/** What every piscina thread is told at start-up (piscina's workerData); plain data. */
export interface ThreadSettings {
  databaseUrl: string;
  redisUrl?: string;
  keyPrefix: string;
  pgPoolSize: number;
  defaultFetchSize: number;
  windowChunks: number;
  windowBytes: number;
  maxEntryBytes: number;
  streamTtlSeconds: number;
  clientIdleTimeoutMs: number;
}
