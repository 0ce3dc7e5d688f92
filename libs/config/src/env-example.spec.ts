import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { SluiceConfig, loadConfig } from './sluice.config';

// A documented variable must do something: libs/config reads it into a setting, and code outside
// libs/config reads that setting.
const root = join(__dirname, '..', '..', '..');
const example = readFileSync(join(root, '.env.example'), 'utf8');
const documented = [...example.matchAll(/^([A-Z][A-Z0-9_]*)=/gm)].map((m) => m[1]);

const OTLP = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel.example:4318' };

/**
 * Each variable, the setting it feeds and a valid value other than the default (`with`: the
 * variables it needs beside it).
 */
const FEEDS: Record<
  string,
  { setting: keyof SluiceConfig; value: string; with?: Record<string, string> }
> = {
  DATABASE_URL: { setting: 'databaseUrl', value: 'postgresql://u@db.example:5432/d' },
  SLUICE_METADATA_DATABASE_URL: {
    setting: 'metadataDatabaseUrl',
    value: 'postgresql://u@meta.example:5432/m',
  },
  REDIS_URL: { setting: 'redis', value: 'redis://redis.example:6379' },
  SLUICE_REDIS_CLUSTER_NODES: { setting: 'redis', value: 'a.example:7001,b.example:7002' },
  SLUICE_REDIS_SENTINELS: { setting: 'redis', value: 's1.example:26379' },
  SLUICE_REDIS_SENTINEL_NAME: {
    setting: 'redis',
    value: 'sluice',
    with: { SLUICE_REDIS_SENTINELS: 's1.example:26379' },
  },
  SLUICE_REDIS_PASSWORD: {
    setting: 'redis',
    value: 'secret',
    with: { SLUICE_REDIS_CLUSTER_NODES: 'a.example:7001' },
  },
  SLUICE_REDIS_SENTINEL_PASSWORD: {
    setting: 'redis',
    value: 'secret',
    with: { SLUICE_REDIS_SENTINELS: 's1.example:26379' },
  },
  SLUICE_REDIS_TLS: {
    setting: 'redis',
    value: 'true',
    with: { SLUICE_REDIS_CLUSTER_NODES: 'a.example:7001' },
  },
  SLUICE_REDIS_TLS_CA: {
    setting: 'redis',
    value: __filename,
    with: { SLUICE_REDIS_CLUSTER_NODES: 'a.example:7001', SLUICE_REDIS_TLS: 'true' },
  },
  SLUICE_CREDENTIAL_KEY: { setting: 'credentialKey', value: 'k'.repeat(32) },
  SLUICE_LOGIN_ROLE_SWEEP_SECONDS: { setting: 'loginRoleSweepSeconds', value: '60' },
  SLUICE_AUTH: { setting: 'authMode', value: 'database' },
  SLUICE_ALLOW_PRIVILEGED_DATABASE_USERS: {
    setting: 'allowPrivilegedDatabaseUsers',
    value: 'true',
  },
  SLUICE_KEY_PREFIX: { setting: 'keyPrefix', value: 'other' },
  SLUICE_DATA_DIR: { setting: 'dataDir', value: '/var/lib/sluice' },
  SLUICE_EMBEDDED_PG_PORT: { setting: 'embeddedPgPort', value: '54400' },
  PORT: { setting: 'port', value: '9090' },
  HOST: { setting: 'host', value: '127.0.0.1' },
  SLUICE_ALLOWED_HOSTS: { setting: 'allowedHosts', value: 'sluice.example.com' },
  SLUICE_JWT_SECRET: { setting: 'jwtSecret', value: 's'.repeat(32) },
  SLUICE_JWT_PREVIOUS_SECRET: { setting: 'jwtPreviousSecret', value: 'p'.repeat(32) },
  SLUICE_JWT_TTL_SECONDS: { setting: 'jwtTtlSeconds', value: '600' },
  SLUICE_ADMIN_USER: { setting: 'adminUser', value: 'root' },
  SLUICE_ADMIN_PASSWORD: { setting: 'adminPassword', value: 'secret-password' },
  SLUICE_ADMIN_ROLE: { setting: 'adminRole', value: 'admins' },
  SLUICE_ADMIN_SESSION_SECONDS: { setting: 'adminSessionSeconds', value: '600' },
  SLUICE_MAX_BODY_BYTES: { setting: 'maxBodyBytes', value: '2048' },
  SLUICE_MAX_RECEIVING_BYTES: { setting: 'maxReceivingBytes', value: '2097152' },
  SLUICE_MAX_STATEMENT_LENGTH: { setting: 'maxStatementLength', value: '1000' },
  SLUICE_MAX_PARAMS: { setting: 'maxParams', value: '10' },
  SLUICE_MAX_PARAM_BYTES: { setting: 'maxParamBytes', value: '100' },
  SLUICE_MAX_JSON_DEPTH: { setting: 'maxJsonDepth', value: '8' },
  SLUICE_JWT_REFRESH_WINDOW_SECONDS: { setting: 'jwtRefreshWindowSeconds', value: '600' },
  SLUICE_LOGIN_MAX_FAILURES: { setting: 'loginMaxFailures', value: '3' },
  SLUICE_LOGIN_MAX_FAILURES_PER_ADDRESS: { setting: 'loginMaxFailuresPerAddress', value: '0' },
  SLUICE_LOGIN_LOCKOUT_SECONDS: { setting: 'loginLockoutSeconds', value: '5' },
  SLUICE_PRODUCER_SILENCE_MS: { setting: 'producerSilenceMs', value: '500' },
  SLUICE_JOB_LOCK_MS: { setting: 'jobLockMs', value: '3000' },
  SLUICE_READER_BEAT_MS: { setting: 'readerBeatMs', value: '500' },
  SLUICE_WORKER_THREADS: { setting: 'workerThreads', value: '3' },
  SLUICE_TASKS_PER_THREAD: { setting: 'tasksPerThread', value: '2' },
  SLUICE_WORKER_LANES: { setting: 'workerLanes', value: 'export' },
  SLUICE_WORKER_INTERACTIVE_RESERVE: { setting: 'interactiveReserve', value: '2' },
  SLUICE_WORKER_USER_SHARE_PERCENT: { setting: 'workerUserSharePercent', value: '25' },
  SLUICE_EXPORT_WORKER_NICE: { setting: 'exportWorkerNice', value: '5' },
  SLUICE_EXPORT_YIELD_MS: { setting: 'exportYieldMs', value: '20' },
  SLUICE_HEAP_GROWING_PERCENT: { setting: 'heapGrowingPercent', value: '0' },
  SLUICE_THREAD_YOUNG_GENERATION_MB: { setting: 'threadYoungGenerationMb', value: '0' },
  SLUICE_PG_POOL_SIZE: { setting: 'pgPoolSize', value: '2' },
  SLUICE_PG_CONNECT_TIMEOUT_MS: { setting: 'pgConnectTimeoutMs', value: '2000' },
  SLUICE_PG_MAX_CONNECTIONS: { setting: 'pgMaxConnections', value: '5000' },
  SLUICE_DEFAULT_FETCH_SIZE: { setting: 'defaultFetchSize', value: '10' },
  SLUICE_WORKER_METRICS_PORT: { setting: 'workerMetricsPort', value: '0' },
  SLUICE_WORKER_HEARTBEAT_MS: { setting: 'workerHeartbeatMs', value: '1000' },
  SLUICE_WINDOW_CHUNKS: { setting: 'windowChunks', value: '4' },
  SLUICE_WINDOW_BYTES: { setting: 'windowBytes', value: '65536' },
  SLUICE_MAX_ENTRY_BYTES: { setting: 'maxEntryBytes', value: '16384' },
  SLUICE_CLIENT_IDLE_TIMEOUT_MS: { setting: 'clientIdleTimeoutMs', value: '1000' },
  SLUICE_SLOT_LEASE_MS: { setting: 'slotLeaseMs', value: '2000' },
  SLUICE_REQUEST_TIMEOUT_MS: { setting: 'requestTimeoutMs', value: '5000' },
  SLUICE_STREAM_TTL_SECONDS: { setting: 'streamTtlSeconds', value: '60' },
  SLUICE_RESULT_TTL_SECONDS: { setting: 'resultTtlSeconds', value: '60' },
  SLUICE_RESULT_MAX_BYTES: { setting: 'resultMaxBytes', value: '1048576' },
  SLUICE_RESULT_TOTAL_MAX_BYTES: { setting: 'resultTotalMaxBytes', value: '4194304' },
  SLUICE_RESULT_USER_MAX_BYTES: { setting: 'resultUserMaxBytes', value: '2097152' },
  SLUICE_SPOOL_URL: { setting: 'spool', value: 's3://bucket/results' },
  SLUICE_SPOOL_S3_ENDPOINT: { setting: 'spool', value: 'http://s3.example:9000' },
  SLUICE_SPOOL_S3_REGION: { setting: 'spool', value: 'eu-west-1' },
  SLUICE_SPOOL_PRESIGN_SECONDS: { setting: 'spool', value: '300' },
  SLUICE_SPOOL_SEGMENT_BYTES: { setting: 'spool', value: '8MiB' },
  SLUICE_SPOOL_SEAL_MS: { setting: 'spool', value: '200' },
  SLUICE_SPOOL_MAX_BYTES: { setting: 'spool', value: '1GiB' },
  SLUICE_SPOOL_USER_MAX_BYTES: { setting: 'spool', value: '2GiB' },
  SLUICE_SPOOL_TOTAL_MAX_BYTES: { setting: 'spool', value: '3GiB' },
  SLUICE_SPOOL_SWEEP_SECONDS: { setting: 'spool', value: '5' },
  SLUICE_SPOOL_ORPHAN_SECONDS: { setting: 'spool', value: '30' },
  SLUICE_JOB_RETENTION_SECONDS: { setting: 'jobRetentionSeconds', value: '60' },
  SLUICE_JOB_RETENTION_COUNT: { setting: 'jobRetentionCount', value: '10' },
  SLUICE_QUERY_RETENTION_COUNT: { setting: 'queryRetentionCount', value: '100' },
  SLUICE_RESULT_RETENTION_COUNT: { setting: 'resultRetentionCount', value: '100' },
  SLUICE_RECORD_STATEMENT_BYTES: { setting: 'recordStatementBytes', value: '65536' },
  SLUICE_RETENTION_TRIM_INTERVAL_MS: { setting: 'retentionTrimIntervalMs', value: '500' },
  SLUICE_IDEMPOTENCY_KEYS_PER_USER: { setting: 'idempotencyKeysPerUser', value: '100' },
  LOG_LEVEL: { setting: 'logLevel', value: 'debug' },
  OTEL_EXPORTER_OTLP_ENDPOINT: { setting: 'tracing', value: 'http://otel.example:4318' },
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: {
    setting: 'tracing',
    value: 'http://otel.example:4318/v1/traces',
  },
  OTEL_EXPORTER_OTLP_PROTOCOL: { setting: 'tracing', value: 'http/json', with: OTLP },
  OTEL_SERVICE_NAME: { setting: 'tracing', value: 'sql', with: OTLP },
  OTEL_TRACES_SAMPLER: { setting: 'tracing', value: 'traceidratio', with: OTLP },
  OTEL_TRACES_SAMPLER_ARG: { setting: 'tracing', value: '0.25', with: OTLP },
  OTEL_RESOURCE_ATTRIBUTES: {
    setting: 'tracing',
    value: 'deployment.environment=prod',
    with: OTLP,
  },
  SLUICE_TRACE_STATEMENTS: { setting: 'tracing', value: 'true', with: OTLP },
  SLUICE_TRACE_SQLCOMMENTER: { setting: 'tracing', value: 'true', with: OTLP },
  SLUICE_TRACE_URL: { setting: 'traceUrl', value: 'https://jaeger.example/trace/{trace_id}' },
  SLUICE_STATEMENT_TIMEOUT_MS: { setting: 'statementTimeoutMs', value: '1000' },
  SLUICE_MAX_STATEMENT_TIMEOUT_MS: { setting: 'maxStatementTimeoutMs', value: '2000' },
  SLUICE_MAX_QUEUE_WAIT_MS: { setting: 'maxQueueWaitMs', value: '1000' },
  SLUICE_MAX_QUEUED: { setting: 'maxQueued', value: '10' },
  SLUICE_MAX_ACTIVE_PER_USER: { setting: 'maxActivePerUser', value: '2' },
  SLUICE_CANCEL_POLL_MS: { setting: 'cancelPollMs', value: '250' },
  SLUICE_SHUTDOWN_GRACE_MS: { setting: 'shutdownGraceMs', value: '1000' },
};

/** The source of everything outside libs/config that runs (specs excluded). */
function sourceOutsideConfig(): string {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.spec.ts')) files.push(path);
    }
  };
  walk(join(root, 'apps'));
  for (const lib of readdirSync(join(root, 'libs'))) {
    if (lib !== 'config') walk(join(root, 'libs', lib));
  }
  return files.map((file) => readFileSync(file, 'utf8')).join('\n');
}

describe('.env.example', () => {
  it('lists every variable libs/config reads, and no other', () => {
    const read = new Set<string>();
    const env = new Proxy<Record<string, string | undefined>>(
      {},
      {
        get: (_target, name) => {
          if (typeof name === 'string') read.add(name);
          return undefined;
        },
      },
    );
    loadConfig(env);
    expect([...documented].sort()).toEqual([...read].sort());
  });

  it('holds values that libs/config accepts', () => {
    const env = Object.fromEntries(
      [...example.matchAll(/^([A-Z][A-Z0-9_]*)=(.*)$/gm)].map((m) => [m[1], m[2]]),
    );
    expect(() => loadConfig(env)).not.toThrow();
  });

  it('names the setting each variable feeds', () => {
    expect(Object.keys(FEEDS).sort()).toEqual([...documented].sort());
    for (const [variable, { setting, value, with: beside = {} }] of Object.entries(FEEDS)) {
      // Compared as JSON: a setting may be an object, made anew by each load.
      const unset = JSON.stringify(loadConfig(beside)[setting]);
      const set = JSON.stringify(loadConfig({ ...beside, [variable]: value })[setting]);
      expect({ variable, changed: set !== unset }).toEqual({ variable, changed: true });
    }
  });

  it('feeds only settings that code outside libs/config reads', () => {
    const source = sourceOutsideConfig();
    const unread = Object.entries(FEEDS)
      .filter(([, { setting }]) => !new RegExp(`\\.${setting}\\b`).test(source))
      .map(([variable]) => variable);
    expect(unread).toEqual([]);
  });
});
