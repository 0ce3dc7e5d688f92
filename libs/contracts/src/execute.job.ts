/**
 * Which queue a job waits in: `export` for bulk answers (Parquet, Arrow, or asked for), run on
 * threads of their own at a lower priority; `interactive` for everything else.
 */
export type Lane = 'interactive' | 'export';

export const LANES: readonly Lane[] = ['interactive', 'export'];

/** Name of the BullMQ queue that carries interactive executions (the one queue before lanes). */
export const EXECUTE_QUEUE = 'execute';

/** The BullMQ queue of each lane; all under the deployment's hash-tagged prefix. */
export const LANE_QUEUES: Readonly<Record<Lane, string>> = {
  interactive: EXECUTE_QUEUE,
  export: `${EXECUTE_QUEUE}-export`,
};

export type ResultFormat = 'json' | 'ndjson' | 'csv' | 'parquet' | 'arrow';
export type ResultLayout = 'array' | 'collection';
export type ContentEncoding = 'gzip' | 'br';

/** The `compression` parameter of `Accept: application/parquet`: the codec of the file's pages. */
export const PARQUET_COMPRESSIONS = ['zstd', 'snappy', 'gzip', 'none'] as const;
export type ParquetCompression = (typeof PARQUET_COMPRESSIONS)[number];

/** Everything a worker needs to run one statement; plain data (structured-clone safe). */
export interface ExecuteJobData {
  queryId: string;
  /** Statement text with `{name}` placeholders already turned into $n. */
  text: string;
  values: (string | null)[];
  types: number[];
  username: string;
  role: string;
  readOnly: boolean;
  /**
   * Database users (SLUICE_AUTH=database): the id of the login session whose credential the
   * statement runs over; the worker reads it server-side. Never the credential itself.
   */
  session?: string;
  database?: string;
  schema?: string;
  format: ResultFormat;
  layout: ResultLayout;
  /** Rows per chunk; 0 lets the server pick. */
  fetchSize: number;
  maxRows?: number;
  encoding?: { name: ContentEncoding; level: number };
  /** Parquet only: the codec of the file's pages (absent: zstd, the default). */
  parquetCompression?: ParquetCompression;
  /** Limit on the statement's run time, from the start of execution (ms). */
  timeoutMs?: number;
  /** Latest start: a job still waiting then is not run (epoch ms). */
  startBy?: number;
  /** The queue the job waits in; the worker that takes it serves this lane. */
  lane: Lane;
  /**
   * The result is kept in its channel to be fetched later (an asynchronous or resumable query):
   * produced whether or not anyone reads it, up to `maxBytes` of body, and kept `ttlSeconds`
   * after its last write, within `totalMaxBytes` for all kept results together and `userMaxBytes`
   * for its user's (each absent in jobs queued before that cap). `spooled`: its body goes to the
   * spool (SLUICE_SPOOL_URL) in segments, its channel holding only their list, and the caps are
   * the spool's. Absent: read as it is produced, and gone once read.
   */
  kept?: {
    ttlSeconds: number;
    maxBytes: number;
    totalMaxBytes?: number;
    userMaxBytes?: number;
    spooled?: boolean;
  };
  /** Dispatch priority (1 first): the class of its user's queries in flight (dispatchPriority). */
  priority?: number;
  enqueuedAt: number;
  /**
   * The query's trace (W3C trace context of the api's enqueue span): the worker's spans continue
   * it. Absent when tracing is off or the request was not sampled.
   */
  trace?: { traceparent: string; tracestate?: string };
}

/** Whether a job still waiting now is past its latest start: it is then ended, never run. */
export function pastLatestStart(job: ExecuteJobData, now = Date.now()): boolean {
  return job.startBy !== undefined && now > job.startBy;
}
