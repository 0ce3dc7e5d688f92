import { accessSync, constants } from 'node:fs';
import { availableParallelism } from 'node:os';
import { isAbsolute, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { LANES, Lane } from '@app/contracts';
import { AllowedHosts, LOOPBACK_HOSTS, boundHost, parseHostAndPort } from './allowed-hosts';

/** Every setting of Sluice, read from the environment once at start-up. */
export interface SluiceConfig {
  port: number;
  host: string;
  /**
   * The `Host` headers the api answers (SLUICE_ALLOWED_HOSTS): a page on a name an attacker points
   * at the api's address (DNS rebinding) is same-origin to the browser, so only the name tells it
   * apart. Standalone mode without the setting: the loopback names and HOST's address.
   */
  allowedHosts: AllowedHosts;
  /** Where statements run; undefined: standalone mode starts an embedded PostgreSQL. */
  databaseUrl?: string;
  /** Where users and revoked tokens live (schema `sluice`). */
  metadataDatabaseUrl?: string;
  /** Where the queue and result streams live; undefined: standalone mode (in-process). */
  redis?: RedisSettings;
  keyPrefix: string;
  /**
   * Who users are: `service` (Sluice's users table, each mapped to a PostgreSQL role) or
   * `database` (PostgreSQL's own roles and passwords).
   */
  authMode: AuthMode;
  /**
   * Database users only: lets superusers, Sluice's own logins (DATABASE_URL's and
   * SLUICE_METADATA_DATABASE_URL's) and members of the predefined roles that reach the server's
   * files and programs log in (SLUICE_ALLOW_PRIVILEGED_DATABASE_USERS; refused by default).
   */
  allowPrivilegedDatabaseUsers: boolean;
  /**
   * Secret from which login-role passwords and the key sealing database-user credentials are
   * derived; the same on every api and worker process.
   */
  credentialKey?: string;
  /**
   * How often (s) an api drops the login roles of an earlier credentialKey that nothing uses any
   * more (service users); 0: never.
   */
  loginRoleSweepSeconds: number;
  jwtSecret?: string;
  /**
   * A JWT secret being rotated out: tokens signed with it are still accepted (never issued), so
   * that a change of jwtSecret logs nobody out.
   */
  jwtPreviousSecret?: string;
  jwtTtlSeconds: number;
  /** Life of the admin pages' sign-in cookie (s): short, and never renewed. */
  adminSessionSeconds: number;
  adminUser?: string;
  adminPassword?: string;
  adminRole?: string;
  workerThreads: number;
  tasksPerThread: number;
  /** Worker: the lanes whose queues it takes jobs from (default: all). */
  workerLanes: Lane[];
  /**
   * Threads of a worker serving both lanes (and of standalone mode's pool) that export work never
   * takes: their task slots are for interactive jobs only.
   */
  interactiveReserve: number;
  /**
   * The share (%) of a worker's slots in each lane that one user's queries hold at once, rounded
   * up, at least one; the rest are left to other users.
   */
  workerUserSharePercent: number;
  /**
   * The nice value (0–19) a worker serving only the export lane runs at, its threads included,
   * so that on a machine it shares with interactive work the kernel gives that work the CPU
   * first; 0 leaves it.
   */
  exportWorkerNice: number;
  /**
   * How long an export waits before each further batch while interactive statements run in the
   * same process (ms; 0: never), so that it and its PostgreSQL backend leave them the CPU.
   */
  exportYieldMs: number;
  /**
   * How much V8 lets the old generation grow past what its last mark-compact kept before the next
   * one, in percent (0: V8 decides). Each process sets it for itself and its threads at start.
   */
  heapGrowingPercent: number;
  /**
   * The young generation of each pool thread's V8 heap (MB; 0: V8 decides, up to 48 MB on 64-bit,
   * which a thread's export grew to). Bounds what a thread holds between scavenges.
   */
  threadYoungGenerationMb: number;
  pgPoolSize: number;
  /** Longest a new connection to PostgreSQL may take (any pool, any database): then 503. */
  pgConnectTimeoutMs: number;
  /** Statement connections a worker process keeps open at most, all threads and roles together. */
  pgMaxConnections: number;
  defaultFetchSize: number;
  windowChunks: number;
  windowBytes: number;
  maxEntryBytes: number;
  streamTtlSeconds: number;
  /** How long the result of an asynchronous query is kept after its last write (s). */
  resultTtlSeconds: number;
  /** Most body bytes an asynchronous query's result may keep; a larger one fails. */
  resultMaxBytes: number;
  /**
   * Most body bytes all kept results may hold together (Redis memory, or this process's in
   * standalone mode); a result that would pass it fails the way a too large one does.
   */
  resultTotalMaxBytes: number;
  /**
   * Most body bytes one user's kept results may hold together, so that no user takes all of
   * resultTotalMaxBytes from the others; a result that would pass it fails the same way.
   */
  resultUserMaxBytes: number;
  /**
   * Where kept results' bodies are written, in segments (SLUICE_SPOOL_URL); undefined: in Redis,
   * as before (cluster mode without the setting). Standalone mode's default is a directory under
   * dataDir.
   */
  spool?: SpoolSettings;
  /**
   * How long a user's query slot is held past its last renewal (ms): what a release lost to a
   * Redis blip, or a holder that died, costs its owner. Holders renew three times a lease.
   */
  slotLeaseMs: number;
  clientIdleTimeoutMs: number;
  /** Longest a request's headers and body may take to arrive (ms; 408 past it). */
  requestTimeoutMs: number;
  /**
   * A result stream silent this long makes the api check that its job's worker still holds it,
   * and again as often while the silence lasts: a dead worker is noticed within the worker's
   * job lock (jobLockMs) plus this.
   */
  producerSilenceMs: number;
  /**
   * How long a worker's hold on a job (BullMQ's lockDuration) lasts past its last renewal (ms;
   * renewed every half of it while the job runs): how long a dead worker's job takes to be
   * noticed. Its stalled-job check runs every half of it too.
   */
  jobLockMs: number;
  /**
   * How often an api reading a query refreshes the query's alive key (ms); the key lives three
   * times as long, and a worker stops the statement of a query whose key lapsed.
   */
  readerBeatMs: number;
  maxBodyBytes: number;
  /**
   * Bytes of request bodies an api holds while they arrive, every request's together, past each
   * body's first 64 KiB: past it, a request is answered 503 (bodies sent slowly, a byte at a time,
   * would otherwise each hold up to maxBodyBytes until requestTimeoutMs, however many connections
   * a client opened).
   */
  maxReceivingBytes: number;
  jobRetentionSeconds: number;
  /** Finished jobs each lane's queue keeps at most, completed and failed each (0: none). */
  jobRetentionCount: number;
  /**
   * Finished queries' records the registry keeps at most, per user (beyond a user's newest this
   * many queries, only open ones and kept results' stay), each no longer than jobRetentionSeconds.
   */
  queryRetentionCount: number;
  /**
   * Finished queries with kept results the registry keeps at most, per user: beyond a user's
   * newest this many, such a query's record goes, and its result with it.
   */
  resultRetentionCount: number;
  /**
   * Bytes of its statement (UTF-8) a query's record holds at most, for GET /v1/queries/{id} and
   * the admin page's detail view: a longer statement is kept cut at a character's end. Lists show
   * its first 200 characters whatever this is.
   */
  recordStatementBytes: number;
  /**
   * How often (ms) one api caps the index of everyone's queries and trims the kept results past
   * resultRetentionCount (Redis; the in-process registry trims as queries end).
   */
  retentionTrimIntervalMs: number;
  /**
   * Live Idempotency-Keys one user may hold at once (each lasts resultTtlSeconds): past it, a
   * request with a new key is refused, 429, until the oldest lapses.
   */
  idempotencyKeysPerUser: number;
  /** A token can be refreshed until this long after the login that began its session. */
  jwtRefreshWindowSeconds: number;
  /** Failed logins per user name, and per client address (0: no limit), within the lockout. */
  loginMaxFailures: number;
  loginMaxFailuresPerAddress: number;
  loginLockoutSeconds: number;
  /** Request limits enforced before anything is queued. */
  maxStatementLength: number;
  maxParams: number;
  maxParamBytes: number;
  maxJsonDepth: number;
  logLevel: string;
  /** Worker: HTTP port for /metrics and /health/ready (0: none). */
  workerMetricsPort: number;
  /** How often a worker writes its heartbeat (ms); the api counts it lost after three missed. */
  workerHeartbeatMs: number;
  /** Standalone mode: where the embedded PostgreSQL and generated secrets are kept. */
  dataDir: string;
  embeddedPgPort: number;
  // Query lifecycle: time limits, admission, shutdown.
  statementTimeoutMs: number;
  maxStatementTimeoutMs: number;
  maxQueueWaitMs: number;
  maxQueued: number;
  maxActivePerUser: number;
  cancelPollMs: number;
  shutdownGraceMs: number;
  /** OpenTelemetry tracing, from the standard OTEL_* variables; undefined: off (no SDK loaded). */
  tracing?: TracingSettings;
  /** A link from a query to its trace (SLUICE_TRACE_URL): `{trace_id}` is replaced by its id. */
  traceUrl?: string;
}

/** The OTEL_TRACES_SAMPLER values Sluice accepts (the SDK's own names). */
export const TRACE_SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;
export type TraceSampler = (typeof TRACE_SAMPLERS)[number];

/**
 * How spans are made and exported (plain data). Read here from the OTEL_* variables the
 * OpenTelemetry specification defines, and handed to the SDK as explicit options: the SDK is
 * never left to find them in the environment on its own.
 */
export interface TracingSettings {
  /** The OTLP/HTTP traces URL: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces. */
  endpoint: string;
  /** OTEL_EXPORTER_OTLP_PROTOCOL: OTLP over HTTP as protobuf (the default) or JSON. */
  protocol: 'http/protobuf' | 'http/json';
  /** OTEL_SERVICE_NAME; absent: sluice-api, sluice-worker or sluice (standalone). */
  serviceName?: string;
  sampler: TraceSampler;
  /** OTEL_TRACES_SAMPLER_ARG: the ratio of the traceidratio samplers (0–1). */
  samplerRatio: number;
  /** OTEL_RESOURCE_ATTRIBUTES, decoded. */
  resourceAttributes: Record<string, string>;
  /** SLUICE_TRACE_STATEMENTS: the statement's text (placeholders, never values) in its span. */
  statements: boolean;
  /** SLUICE_TRACE_SQLCOMMENTER: the statement carries its span's traceparent as a comment. */
  sqlcommenter: boolean;
}

export type AuthMode = 'service' | 'database';

/** A Redis node or sentinel as `host:port`. */
export interface RedisAddress {
  host: string;
  port: number;
}

/**
 * How Sluice reaches Redis (plain data: piscina threads get it too): one node (`REDIS_URL`), a
 * Redis Cluster through seed nodes, or the master a set of Sentinels names.
 */
export type RedisSettings =
  | { mode: 'single'; url: string }
  | { mode: 'cluster'; nodes: RedisAddress[]; password?: string; tls: boolean; tlsCa?: string }
  | {
      mode: 'sentinel';
      sentinels: RedisAddress[];
      name: string;
      password?: string;
      sentinelPassword?: string;
      tls: boolean;
      /** A PEM file of the certificate authorities Redis's certificates are checked against. */
      tlsCa?: string;
    };

/**
 * The spool of kept results (plain data: piscina threads get it too): the store, and the caps and
 * timings of what is written there.
 */
export interface SpoolSettings {
  /** `file:///abs/dir` or `s3://bucket/prefix`. */
  url: string;
  /**
   * The deployment's own place in the store (SLUICE_KEY_PREFIX): its segments are kept, and its
   * sweep looks, only under it, so that deployments sharing a bucket or a directory never touch
   * each other's results, nor anything else kept there.
   */
  namespace: string;
  /** A non-AWS S3 endpoint (SLUICE_SPOOL_S3_ENDPOINT); path-style addressing then. */
  s3Endpoint?: string;
  /** The S3 region (SLUICE_SPOOL_S3_REGION); unset: the SDK's chain (AWS_REGION …). */
  s3Region?: string;
  /** Life of a segment's presigned URL in the manifest (s); 0: no URLs, fetch through the api. */
  presignSeconds: number;
  /** A segment is written once it holds this many bytes (or has waited sealMs, or the result ended). */
  segmentBytes: number;
  /** A segment holding bytes is written at the next write after this long (ms): a fetch of a running query sees them. */
  sealMs: number;
  /** Largest kept result (bytes of body). */
  maxBytes: number;
  /** Bytes one user's kept results may hold together. */
  userMaxBytes: number;
  /** Bytes all kept results may hold together. */
  totalMaxBytes: number;
  /** How often an api sweeps segments whose result is gone (s); 0: never. */
  sweepSeconds: number;
  /** A segment whose result is gone is swept once it is this old (s): one being written is not. */
  orphanSeconds: number;
}

/** A configuration value that stops start-up; the message names the variable. */
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    problem: string,
  ) {
    super(`Invalid configuration: ${variable} ${problem}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

function str(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}

function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = str(env, name);
  if (raw === undefined) return fallback;
  if (!/^-?\d+$/.test(raw)) throw new ConfigError(name, `must be an integer, got "${raw}"`);
  const n = Number(raw);
  if (n < min || n > max)
    throw new ConfigError(name, `must be between ${min} and ${max}, got ${n}`);
  return n;
}

function url(env: Env, name: string, protocols: string[]): string | undefined {
  const raw = str(env, name);
  if (raw === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(name, 'is not a valid URL');
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(name, `must start with ${protocols.map((p) => `${p}//`).join(' or ')}`);
  }
  return raw;
}

const BYTE_UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  kib: 1024,
  mib: 1024 ** 2,
  gib: 1024 ** 3,
  tib: 1024 ** 4,
};

/** A size in bytes: a whole number, or a number with KiB, MiB, GiB or TiB (`10GiB`). */
function byteSize(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = str(env, name);
  if (raw === undefined) return fallback;
  const match = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/i.exec(raw);
  const unit = BYTE_UNITS[match?.[2].toLowerCase() ?? 'x'];
  if (!match || unit === undefined || (unit === 1 && match[1].includes('.'))) {
    throw new ConfigError(
      name,
      `must be a size in bytes (e.g. 1048576, 512MiB, 10GiB), got "${raw}"`,
    );
  }
  const n = Math.floor(Number(match[1]) * unit);
  if (n < min || n > max)
    throw new ConfigError(name, `must be between ${min} and ${max} bytes, got ${n}`);
  return n;
}

/**
 * The spool of kept results, from SLUICE_SPOOL_URL; standalone mode without it spools to
 * `<dataDir>/spool`, cluster mode without it keeps kept results in Redis (undefined).
 */
function spoolSettings(
  env: Env,
  context: { standalone: boolean; dataDir: string; keyPrefix: string },
): SpoolSettings | undefined {
  const raw =
    url(env, 'SLUICE_SPOOL_URL', ['file:', 's3:']) ??
    (context.standalone ? pathToFileURL(resolve(context.dataDir, 'spool')).href : undefined);
  if (raw === undefined) return undefined;
  const parsed = new URL(raw);
  if (parsed.protocol === 'file:' && (parsed.host !== '' || !isAbsolute(fileURLToPath(parsed)))) {
    throw new ConfigError(
      'SLUICE_SPOOL_URL',
      'file:// must name an absolute directory (file:///var/lib/sluice/spool)',
    );
  }
  if (parsed.protocol === 's3:' && !parsed.hostname) {
    throw new ConfigError('SLUICE_SPOOL_URL', 's3:// must name a bucket (s3://bucket/prefix)');
  }
  const GiB = 1024 ** 3;
  return {
    url: raw,
    namespace: context.keyPrefix,
    s3Endpoint: url(env, 'SLUICE_SPOOL_S3_ENDPOINT', ['http:', 'https:']),
    s3Region: str(env, 'SLUICE_SPOOL_S3_REGION'),
    presignSeconds: int(env, 'SLUICE_SPOOL_PRESIGN_SECONDS', 0, 0, 7 * 86400),
    segmentBytes: byteSize(env, 'SLUICE_SPOOL_SEGMENT_BYTES', 16 * 1024 ** 2, 64 * 1024, 1024 ** 3),
    sealMs: int(env, 'SLUICE_SPOOL_SEAL_MS', 1000, 0, 600_000),
    maxBytes: byteSize(env, 'SLUICE_SPOOL_MAX_BYTES', 10 * GiB, 64 * 1024, 1024 ** 5),
    userMaxBytes: byteSize(env, 'SLUICE_SPOOL_USER_MAX_BYTES', 50 * GiB, 64 * 1024, 1024 ** 5),
    totalMaxBytes: byteSize(env, 'SLUICE_SPOOL_TOTAL_MAX_BYTES', 500 * GiB, 64 * 1024, 1024 ** 5),
    sweepSeconds: int(env, 'SLUICE_SPOOL_SWEEP_SECONDS', 60, 0, 86_400),
    orphanSeconds: int(env, 'SLUICE_SPOOL_ORPHAN_SECONDS', 600, 1, 30 * 86_400),
  };
}

/** A comma-separated list of `host:port`. */
function addresses(env: Env, name: string): RedisAddress[] | undefined {
  const raw = str(env, name);
  if (raw === undefined) return undefined;
  return raw.split(',').map((item) => {
    const match = /^\s*([A-Za-z0-9_.-]+|\[[0-9A-Fa-f:]+\]):(\d{1,5})\s*$/.exec(item);
    const port = Number(match?.[2]);
    if (!match || port < 1 || port > 65535) {
      throw new ConfigError(name, `must list host:port pairs separated by commas, got "${raw}"`);
    }
    return { host: match[1].replace(/^\[|\]$/g, ''), port };
  });
}

/** One connection mode out of REDIS_URL, SLUICE_REDIS_CLUSTER_NODES and SLUICE_REDIS_SENTINELS. */
function redisSettings(env: Env): RedisSettings | undefined {
  const single = url(env, 'REDIS_URL', ['redis:', 'rediss:']);
  const nodes = addresses(env, 'SLUICE_REDIS_CLUSTER_NODES');
  const sentinels = addresses(env, 'SLUICE_REDIS_SENTINELS');
  const given = [
    single && 'REDIS_URL',
    nodes && 'SLUICE_REDIS_CLUSTER_NODES',
    sentinels && 'SLUICE_REDIS_SENTINELS',
  ].filter(Boolean);
  if (given.length > 1) {
    throw new ConfigError(given[1] as string, `cannot be set together with ${given[0]}: pick one`);
  }
  const name = str(env, 'SLUICE_REDIS_SENTINEL_NAME');
  const password = env.SLUICE_REDIS_PASSWORD || undefined;
  const sentinelPassword = env.SLUICE_REDIS_SENTINEL_PASSWORD || undefined;
  const tlsRaw = str(env, 'SLUICE_REDIS_TLS');
  if (tlsRaw !== undefined && tlsRaw !== 'true' && tlsRaw !== 'false') {
    throw new ConfigError('SLUICE_REDIS_TLS', `must be true or false, got "${tlsRaw}"`);
  }
  const tls = tlsRaw === 'true';
  const tlsCa = str(env, 'SLUICE_REDIS_TLS_CA');
  if (tlsCa !== undefined) {
    try {
      accessSync(tlsCa, constants.R_OK);
    } catch {
      throw new ConfigError('SLUICE_REDIS_TLS_CA', `must name a readable file, got "${tlsCa}"`);
    }
  }
  // Each setting belongs to one mode: one that would be ignored is a mistake worth stopping for.
  const stray = (variable: string, set: unknown, mode: string) => {
    if (set) throw new ConfigError(variable, `applies only with ${mode}`);
  };
  stray('SLUICE_REDIS_SENTINEL_NAME', !sentinels && name, 'SLUICE_REDIS_SENTINELS');
  stray('SLUICE_REDIS_SENTINEL_PASSWORD', !sentinels && sentinelPassword, 'SLUICE_REDIS_SENTINELS');
  const eitherOf =
    'SLUICE_REDIS_CLUSTER_NODES or SLUICE_REDIS_SENTINELS (REDIS_URL carries its own)';
  stray('SLUICE_REDIS_PASSWORD', !nodes && !sentinels && password, eitherOf);
  stray('SLUICE_REDIS_TLS', !nodes && !sentinels && tls, eitherOf);
  stray('SLUICE_REDIS_TLS_CA', !tls && tlsCa, 'SLUICE_REDIS_TLS=true');
  if (single) return { mode: 'single', url: single };
  if (nodes) return { mode: 'cluster', nodes, password, tls, ...(tlsCa ? { tlsCa } : {}) };
  if (sentinels) {
    return {
      mode: 'sentinel',
      sentinels,
      name: name ?? 'mymaster',
      password,
      sentinelPassword,
      tls,
      ...(tlsCa ? { tlsCa } : {}),
    };
  }
  return undefined;
}

function bool(raw: string | undefined, name: string): boolean {
  if (raw === undefined) return false;
  if (raw !== 'true' && raw !== 'false') {
    throw new ConfigError(name, `must be true or false, got "${raw}"`);
  }
  return raw === 'true';
}

/** OTEL_RESOURCE_ATTRIBUTES: `key=value` pairs separated by commas, values percent-encoded. */
function resourceAttributes(raw: string | undefined): Record<string, string> {
  const name = 'OTEL_RESOURCE_ATTRIBUTES';
  const attributes: Record<string, string> = {};
  if (raw === undefined) return attributes;
  for (const pair of raw.split(',')) {
    const at = pair.indexOf('=');
    const key = pair.slice(0, at).trim();
    if (at < 1 || !key) throw new ConfigError(name, `must list key=value pairs, got "${pair}"`);
    try {
      attributes[key] = decodeURIComponent(pair.slice(at + 1).trim());
    } catch {
      throw new ConfigError(name, `has a value that is not percent-encoded: "${pair}"`);
    }
  }
  return attributes;
}

/**
 * Tracing is on when an OTLP endpoint is given (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or
 * OTEL_EXPORTER_OTLP_ENDPOINT, to which /v1/traces is added as the specification says).
 */
function tracingSettings(env: Env): TracingSettings | undefined {
  const traces = url(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', ['http:', 'https:']);
  const base = url(env, 'OTEL_EXPORTER_OTLP_ENDPOINT', ['http:', 'https:']);
  const protocol = str(env, 'OTEL_EXPORTER_OTLP_PROTOCOL') ?? 'http/protobuf';
  if (protocol !== 'http/protobuf' && protocol !== 'http/json') {
    throw new ConfigError(
      'OTEL_EXPORTER_OTLP_PROTOCOL',
      `must be http/protobuf or http/json (Sluice exports over HTTP), got "${protocol}"`,
    );
  }
  const sampler = str(env, 'OTEL_TRACES_SAMPLER') ?? 'parentbased_always_on';
  if (!(TRACE_SAMPLERS as readonly string[]).includes(sampler)) {
    throw new ConfigError('OTEL_TRACES_SAMPLER', `must be one of ${TRACE_SAMPLERS.join(', ')}`);
  }
  const ratioRaw = str(env, 'OTEL_TRACES_SAMPLER_ARG');
  const samplerRatio = ratioRaw === undefined ? 1 : Number(ratioRaw);
  if (!Number.isFinite(samplerRatio) || samplerRatio < 0 || samplerRatio > 1) {
    throw new ConfigError(
      'OTEL_TRACES_SAMPLER_ARG',
      `must be a ratio from 0 to 1, got "${ratioRaw}"`,
    );
  }
  const serviceName = str(env, 'OTEL_SERVICE_NAME');
  const attributes = resourceAttributes(str(env, 'OTEL_RESOURCE_ATTRIBUTES'));
  const statements = bool(str(env, 'SLUICE_TRACE_STATEMENTS'), 'SLUICE_TRACE_STATEMENTS');
  const sqlcommenter = bool(str(env, 'SLUICE_TRACE_SQLCOMMENTER'), 'SLUICE_TRACE_SQLCOMMENTER');
  const endpoint = traces ?? (base ? `${base.replace(/\/+$/, '')}/v1/traces` : undefined);
  if (endpoint === undefined) return undefined;
  return {
    endpoint,
    protocol,
    serviceName,
    sampler: sampler as TraceSampler,
    samplerRatio,
    resourceAttributes: attributes,
    statements,
    sqlcommenter,
  };
}

/** SLUICE_TRACE_URL: a URL with `{trace_id}` in it. */
function traceUrl(env: Env): string | undefined {
  const raw = url(env, 'SLUICE_TRACE_URL', ['http:', 'https:']);
  if (raw !== undefined && !raw.includes('{trace_id}')) {
    throw new ConfigError('SLUICE_TRACE_URL', 'must hold {trace_id}, where the trace id goes');
  }
  return raw;
}

/** A comma-separated list of lanes; empty or unset: every lane. */
function lanes(env: Env, name: string): Lane[] {
  const raw = str(env, name);
  if (raw === undefined) return [...LANES];
  const named = raw.split(',').map((lane) => lane.trim());
  const unknown = named.filter((lane) => !(LANES as readonly string[]).includes(lane));
  if (unknown.length > 0) {
    throw new ConfigError(name, `must list lanes out of ${LANES.join(', ')}, got "${raw}"`);
  }
  return LANES.filter((lane) => named.includes(lane));
}

/**
 * SLUICE_ALLOWED_HOSTS: comma-separated `host[:port]` entries, or a lone `*` for every host.
 * Unset: in standalone mode the loopback names and the address HOST names (what its banner
 * prints); in cluster mode `unset`, every host.
 */
function allowedHosts(
  raw: string | undefined,
  context: { standalone: boolean; bindHost: string },
): AllowedHosts {
  const name = 'SLUICE_ALLOWED_HOSTS';
  if (raw === undefined) {
    if (!context.standalone) return 'unset';
    const bound = boundHost(context.bindHost);
    const listed = LOOPBACK_HOSTS.some((h) => h.host === bound?.host);
    return bound && !listed ? [...LOOPBACK_HOSTS, bound] : LOOPBACK_HOSTS;
  }
  const entries = raw.split(',').map((entry) => entry.trim());
  if (entries.includes('*')) {
    if (entries.length > 1)
      throw new ConfigError(name, `* allows every host: list nothing beside it, got "${raw}"`);
    return 'every';
  }
  return entries.map((entry) => {
    if (entry.includes('*') || entry.startsWith('.')) {
      throw new ConfigError(
        name,
        `has no wildcards but a lone * (every host): list each name, got "${entry}"`,
      );
    }
    const parsed = parseHostAndPort(entry);
    if (!parsed) {
      throw new ConfigError(
        name,
        `must list host names or addresses, each with an optional :port (IPv6 in brackets, [::1]:8080), separated by commas; "${entry}" is not one`,
      );
    }
    return parsed;
  });
}

/** Reads and validates the environment; throws ConfigError on the first bad value. */
export function loadConfig(env: Env = process.env): SluiceConfig {
  const databaseUrl = url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']);
  const keyPrefix = str(env, 'SLUICE_KEY_PREFIX') ?? 'sluice';
  // It names the deployment's directory in a file spool too: never `.` or `..`.
  if (!/^[A-Za-z0-9_.:-]{1,64}$/.test(keyPrefix) || /^\.+$/.test(keyPrefix)) {
    throw new ConfigError(
      'SLUICE_KEY_PREFIX',
      'may hold only letters, digits and _ . : - (1-64), and not dots alone',
    );
  }
  const jwtSecret = str(env, 'SLUICE_JWT_SECRET');
  if (jwtSecret !== undefined && jwtSecret.length < 16) {
    throw new ConfigError('SLUICE_JWT_SECRET', 'must be at least 16 characters');
  }
  const jwtPreviousSecret = str(env, 'SLUICE_JWT_PREVIOUS_SECRET');
  if (jwtPreviousSecret !== undefined && jwtPreviousSecret.length < 16) {
    throw new ConfigError('SLUICE_JWT_PREVIOUS_SECRET', 'must be at least 16 characters');
  }
  if (jwtPreviousSecret !== undefined && jwtPreviousSecret === jwtSecret) {
    throw new ConfigError(
      'SLUICE_JWT_PREVIOUS_SECRET',
      'must differ from SLUICE_JWT_SECRET (it is the secret being rotated out)',
    );
  }
  const adminUser = str(env, 'SLUICE_ADMIN_USER');
  const adminPassword = env.SLUICE_ADMIN_PASSWORD;
  if (adminUser !== undefined && !/^[A-Za-z0-9_.-]{1,128}$/.test(adminUser)) {
    throw new ConfigError('SLUICE_ADMIN_USER', 'may hold only letters, digits and _ . -');
  }
  // The rule every user's password follows (POST /v1/users): the admin's is no weaker.
  if (adminPassword !== undefined && adminPassword !== '' && adminPassword.length < 8) {
    throw new ConfigError('SLUICE_ADMIN_PASSWORD', 'must be at least 8 characters');
  }
  const credentialKey = str(env, 'SLUICE_CREDENTIAL_KEY');
  if (credentialKey !== undefined && credentialKey.length < 32) {
    throw new ConfigError('SLUICE_CREDENTIAL_KEY', 'must be at least 32 characters');
  }
  const authMode = str(env, 'SLUICE_AUTH') ?? 'service';
  if (authMode !== 'service' && authMode !== 'database') {
    throw new ConfigError('SLUICE_AUTH', 'must be service or database');
  }
  const allowPrivileged = str(env, 'SLUICE_ALLOW_PRIVILEGED_DATABASE_USERS');
  if (allowPrivileged !== undefined && allowPrivileged !== 'true' && allowPrivileged !== 'false') {
    throw new ConfigError(
      'SLUICE_ALLOW_PRIVILEGED_DATABASE_USERS',
      `must be true or false, got "${allowPrivileged}"`,
    );
  }
  const workerThreads = int(
    env,
    'SLUICE_WORKER_THREADS',
    Math.max(2, availableParallelism()),
    1,
    256,
  );
  const tasksPerThread = int(env, 'SLUICE_TASKS_PER_THREAD', 4, 1, 64);
  const workerLanes = lanes(env, 'SLUICE_WORKER_LANES');
  const interactiveReserve = int(env, 'SLUICE_WORKER_INTERACTIVE_RESERVE', 1, 0, 256);
  const exportWorkerNice = int(env, 'SLUICE_EXPORT_WORKER_NICE', 10, 0, 19);
  const exportYieldMs = int(env, 'SLUICE_EXPORT_YIELD_MS', 25, 0, 1_000);
  const redis = redisSettings(env);
  // Every running task holds one statement connection: fewer than that could never all run.
  const threads = laneThreads({
    workerThreads,
    interactiveReserve,
    // Without Redis, standalone mode's one pool serves every lane.
    lanes: redis ? workerLanes : LANES,
  });
  const leastConnections = (threads.interactive + threads.export) * tasksPerThread;
  const pgMaxConnections = int(
    env,
    'SLUICE_PG_MAX_CONNECTIONS',
    Math.max(32, leastConnections),
    1,
    100_000,
  );
  if (pgMaxConnections < leastConnections) {
    throw new ConfigError(
      'SLUICE_PG_MAX_CONNECTIONS',
      `must be at least the pool's threads (all lanes) × SLUICE_TASKS_PER_THREAD (${leastConnections}), got ${pgMaxConnections}`,
    );
  }
  const maxBodyBytes = int(env, 'SLUICE_MAX_BODY_BYTES', 1024 * 1024, 1024, 1024 * 1024 * 1024);
  const maxReceivingBytes = int(
    env,
    'SLUICE_MAX_RECEIVING_BYTES',
    Math.max(64 * 1024 * 1024, maxBodyBytes),
    1024,
    1024 * 1024 * 1024 * 1024,
  );
  if (maxReceivingBytes < maxBodyBytes) {
    throw new ConfigError(
      'SLUICE_MAX_RECEIVING_BYTES',
      `must be at least SLUICE_MAX_BODY_BYTES (${maxBodyBytes}), got ${maxReceivingBytes}`,
    );
  }
  const logLevel = str(env, 'LOG_LEVEL') ?? 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    throw new ConfigError(
      'LOG_LEVEL',
      'must be one of fatal, error, warn, info, debug, trace, silent',
    );
  }
  const host = str(env, 'HOST') ?? '0.0.0.0';
  const dataDir = str(env, 'SLUICE_DATA_DIR') ?? '.data';
  return {
    port: int(env, 'PORT', 8080, 0, 65535),
    host,
    allowedHosts: allowedHosts(str(env, 'SLUICE_ALLOWED_HOSTS'), {
      standalone: redis === undefined,
      bindHost: host,
    }),
    databaseUrl,
    metadataDatabaseUrl:
      url(env, 'SLUICE_METADATA_DATABASE_URL', ['postgres:', 'postgresql:']) ?? databaseUrl,
    redis,
    keyPrefix,
    authMode,
    allowPrivilegedDatabaseUsers: allowPrivileged === 'true',
    credentialKey,
    loginRoleSweepSeconds: int(env, 'SLUICE_LOGIN_ROLE_SWEEP_SECONDS', 300, 0, 86_400),
    jwtSecret,
    jwtPreviousSecret,
    jwtTtlSeconds: int(env, 'SLUICE_JWT_TTL_SECONDS', 3600, 60, 30 * 86400),
    adminSessionSeconds: int(env, 'SLUICE_ADMIN_SESSION_SECONDS', 900, 60, 12 * 3600),
    adminUser,
    adminPassword: adminPassword === '' ? undefined : adminPassword,
    adminRole: str(env, 'SLUICE_ADMIN_ROLE'),
    workerThreads,
    tasksPerThread,
    workerLanes,
    interactiveReserve,
    workerUserSharePercent: int(env, 'SLUICE_WORKER_USER_SHARE_PERCENT', 50, 1, 100),
    exportWorkerNice,
    exportYieldMs,
    heapGrowingPercent: int(env, 'SLUICE_HEAP_GROWING_PERCENT', 200, 0, 1_000),
    threadYoungGenerationMb: int(env, 'SLUICE_THREAD_YOUNG_GENERATION_MB', 12, 0, 1_024),
    pgPoolSize: int(env, 'SLUICE_PG_POOL_SIZE', 4, 1, 256),
    pgConnectTimeoutMs: int(env, 'SLUICE_PG_CONNECT_TIMEOUT_MS', 10_000, 100, 600_000),
    pgMaxConnections,
    defaultFetchSize: int(env, 'SLUICE_DEFAULT_FETCH_SIZE', 1000, 1, 1_000_000),
    windowChunks: int(env, 'SLUICE_WINDOW_CHUNKS', 16, 1, 10_000),
    windowBytes: int(env, 'SLUICE_WINDOW_BYTES', 8 * 1024 * 1024, 64 * 1024, 1024 * 1024 * 1024),
    maxEntryBytes: int(env, 'SLUICE_MAX_ENTRY_BYTES', 1024 * 1024, 16 * 1024, 64 * 1024 * 1024),
    streamTtlSeconds: int(env, 'SLUICE_STREAM_TTL_SECONDS', 300, 5, 86400),
    resultTtlSeconds: int(env, 'SLUICE_RESULT_TTL_SECONDS', 3600, 5, 7 * 86400),
    resultMaxBytes: int(
      env,
      'SLUICE_RESULT_MAX_BYTES',
      64 * 1024 * 1024,
      64 * 1024,
      16 * 1024 * 1024 * 1024,
    ),
    resultTotalMaxBytes: int(
      env,
      'SLUICE_RESULT_TOTAL_MAX_BYTES',
      1024 * 1024 * 1024,
      64 * 1024,
      1024 * 1024 * 1024 * 1024,
    ),
    resultUserMaxBytes: int(
      env,
      'SLUICE_RESULT_USER_MAX_BYTES',
      256 * 1024 * 1024,
      64 * 1024,
      1024 * 1024 * 1024 * 1024,
    ),
    slotLeaseMs: int(env, 'SLUICE_SLOT_LEASE_MS', 15_000, 1_000, 600_000),
    clientIdleTimeoutMs: int(env, 'SLUICE_CLIENT_IDLE_TIMEOUT_MS', 60_000, 100, 3_600_000),
    requestTimeoutMs: int(env, 'SLUICE_REQUEST_TIMEOUT_MS', 30_000, 1_000, 3_600_000),
    producerSilenceMs: int(env, 'SLUICE_PRODUCER_SILENCE_MS', 2000, 100, 3_600_000),
    jobLockMs: int(env, 'SLUICE_JOB_LOCK_MS', 10_000, 1_000, 600_000),
    readerBeatMs: int(env, 'SLUICE_READER_BEAT_MS', 2000, 100, 60_000),
    maxBodyBytes,
    maxReceivingBytes,
    jobRetentionSeconds: int(env, 'SLUICE_JOB_RETENTION_SECONDS', 3600, 0, 30 * 86400),
    jobRetentionCount: int(env, 'SLUICE_JOB_RETENTION_COUNT', 1000, 0, 1_000_000),
    queryRetentionCount: int(env, 'SLUICE_QUERY_RETENTION_COUNT', 1000, 0, 10_000_000),
    resultRetentionCount: int(env, 'SLUICE_RESULT_RETENTION_COUNT', 10_000, 1, 10_000_000),
    recordStatementBytes: int(env, 'SLUICE_RECORD_STATEMENT_BYTES', 16 * 1024, 1024, 1024 * 1024),
    retentionTrimIntervalMs: int(env, 'SLUICE_RETENTION_TRIM_INTERVAL_MS', 10_000, 100, 3_600_000),
    idempotencyKeysPerUser: int(env, 'SLUICE_IDEMPOTENCY_KEYS_PER_USER', 100_000, 1, 10_000_000),
    jwtRefreshWindowSeconds: int(env, 'SLUICE_JWT_REFRESH_WINDOW_SECONDS', 86400, 60, 365 * 86400),
    loginMaxFailures: int(env, 'SLUICE_LOGIN_MAX_FAILURES', 5, 1, 1_000_000),
    loginMaxFailuresPerAddress: int(env, 'SLUICE_LOGIN_MAX_FAILURES_PER_ADDRESS', 30, 0, 1_000_000),
    loginLockoutSeconds: int(env, 'SLUICE_LOGIN_LOCKOUT_SECONDS', 60, 1, 86400),
    maxStatementLength: int(env, 'SLUICE_MAX_STATEMENT_LENGTH', 256 * 1024, 16, 64 * 1024 * 1024),
    maxParams: int(env, 'SLUICE_MAX_PARAMS', 1000, 0, 65535),
    maxParamBytes: int(env, 'SLUICE_MAX_PARAM_BYTES', 256 * 1024, 1, 1024 * 1024 * 1024),
    maxJsonDepth: int(env, 'SLUICE_MAX_JSON_DEPTH', 64, 4, 1000),
    logLevel,
    workerMetricsPort: int(env, 'SLUICE_WORKER_METRICS_PORT', 9464, 0, 65535),
    workerHeartbeatMs: int(env, 'SLUICE_WORKER_HEARTBEAT_MS', 5000, 100, 60_000),
    dataDir,
    spool: spoolSettings(env, { standalone: redis === undefined, dataDir, keyPrefix }),
    embeddedPgPort: int(env, 'SLUICE_EMBEDDED_PG_PORT', 54329, 1, 65535),
    statementTimeoutMs: int(env, 'SLUICE_STATEMENT_TIMEOUT_MS', 300_000, 0, 86_400_000),
    maxStatementTimeoutMs: int(env, 'SLUICE_MAX_STATEMENT_TIMEOUT_MS', 3_600_000, 1, 86_400_000),
    maxQueueWaitMs: int(env, 'SLUICE_MAX_QUEUE_WAIT_MS', 30_000, 100, 86_400_000),
    maxQueued: int(env, 'SLUICE_MAX_QUEUED', 1000, 1, 1_000_000),
    maxActivePerUser: int(env, 'SLUICE_MAX_ACTIVE_PER_USER', 16, 1, 100_000),
    cancelPollMs: int(env, 'SLUICE_CANCEL_POLL_MS', 100, 10, 10_000),
    shutdownGraceMs: int(env, 'SLUICE_SHUTDOWN_GRACE_MS', 20_000, 0, 600_000),
    tracing: tracingSettings(env),
    traceUrl: traceUrl(env),
  };
}

/** The database of DATABASE_URL: where a statement runs when neither it nor its token names one. */
export function defaultDatabase(config: Pick<SluiceConfig, 'databaseUrl'>): string | undefined {
  if (!config.databaseUrl) return undefined;
  return decodeURIComponent(new URL(config.databaseUrl).pathname.slice(1)) || undefined;
}

/**
 * Threads of each lane's pool in a process serving `lanes` (0: none). The interactive lane gets
 * SLUICE_WORKER_THREADS. The export lane gets as many when it is served alone; beside an
 * interactive pool, threads of its own — SLUICE_WORKER_THREADS − SLUICE_WORKER_INTERACTIVE_RESERVE,
 * at least one — so that export work never runs on an interactive thread.
 */
export function laneThreads(config: {
  workerThreads: number;
  interactiveReserve: number;
  lanes: readonly Lane[];
}): Record<Lane, number> {
  const { workerThreads, interactiveReserve, lanes } = config;
  const interactive = lanes.includes('interactive') ? workerThreads : 0;
  if (!lanes.includes('export')) return { interactive, export: 0 };
  if (!interactive) return { interactive, export: workerThreads };
  return { interactive, export: Math.max(1, workerThreads - interactiveReserve) };
}

/** The lanes the pool of this process serves: standalone mode's serves every one. */
export function poolLanes(config: SluiceConfig): readonly Lane[] {
  return isStandalone(config) ? LANES : config.workerLanes;
}

/** True when no Redis is configured: api and worker run in one process. */
export function isStandalone(config: SluiceConfig): boolean {
  return config.redis === undefined;
}

/**
 * Checks the settings a process needs in cluster mode (its own PostgreSQL and Redis). The api
 * without REDIS_URL runs standalone and needs none of them.
 */
export function requireClusterSettings(config: SluiceConfig, role: 'api' | 'worker'): void {
  if (role === 'api' && isStandalone(config)) return;
  if (!config.redis) {
    throw new ConfigError(
      'REDIS_URL',
      'is required (or SLUICE_REDIS_CLUSTER_NODES, or SLUICE_REDIS_SENTINELS)',
    );
  }
  if (!config.databaseUrl) throw new ConfigError('DATABASE_URL', 'is required');
  if (role === 'api' && !config.jwtSecret)
    throw new ConfigError('SLUICE_JWT_SECRET', 'is required');
  if (!config.credentialKey) throw new ConfigError('SLUICE_CREDENTIAL_KEY', 'is required');
}
