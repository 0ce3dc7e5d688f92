import { ChildProcess, execFile, execFileSync, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { until } from './poll';

const run = promisify(execFile);

/** Every Redis process a test starts dies by itself after this long, whatever befalls the test. */
const LIFETIME_S = 1200;

/** How the tests' processes are reached: their password and TLS, by port. */
const reach = new Map<number, { password?: string; caFile?: string }>();

/** `redis-cli -p <port> <args>` (with the server's password and TLS): its output. */
export async function redisCli(port: number, ...args: string[]): Promise<string> {
  const { password, caFile } = reach.get(port) ?? {};
  const tls = caFile ? ['--tls', '--cacert', caFile] : [];
  const { stdout } = await run('redis-cli', ['-p', String(port), ...tls, ...args], {
    env: password ? { ...process.env, REDISCLI_AUTH: password } : process.env,
  });
  return stdout;
}

/** Who may talk to a test's Redis processes: passwords of the nodes and Sentinels, and TLS. */
export interface RedisSecurity {
  /** The nodes' password (`requirepass`, and `masterauth` for their replicas). */
  password?: string;
  /** The Sentinels' own password. */
  sentinelPassword?: string;
  /** Serve TLS only, with a certificate for 127.0.0.1 from a certificate authority of its own. */
  tls?: boolean;
}

/** The settings that point a Sluice process at servers with this security. */
export function securityEnv(security: RedisSecurity, caFile?: string): Record<string, string> {
  return {
    ...(security.password ? { SLUICE_REDIS_PASSWORD: security.password } : {}),
    ...(security.sentinelPassword
      ? { SLUICE_REDIS_SENTINEL_PASSWORD: security.sentinelPassword }
      : {}),
    ...(caFile ? { SLUICE_REDIS_TLS: 'true', SLUICE_REDIS_TLS_CA: caFile } : {}),
  };
}

/** A certificate authority and a server certificate for 127.0.0.1 it signed, made by openssl. */
function makeCertificates(dir: string): { ca: string; cert: string; key: string } {
  const file = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'ignore' });
  openssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '1',
    '-subj',
    '/CN=sluice test CA',
    '-keyout',
    file('ca.key'),
    '-out',
    file('ca.crt'),
  );
  writeFileSync(file('san.ext'), 'subjectAltName=IP:127.0.0.1\n');
  openssl(
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-subj',
    '/CN=127.0.0.1',
    '-keyout',
    file('redis.key'),
    '-out',
    file('redis.csr'),
  );
  openssl(
    'x509',
    '-req',
    '-in',
    file('redis.csr'),
    '-CA',
    file('ca.crt'),
    '-CAkey',
    file('ca.key'),
    '-CAcreateserial',
    '-days',
    '1',
    '-extfile',
    file('san.ext'),
    '-out',
    file('redis.crt'),
  );
  return { ca: file('ca.crt'), cert: file('redis.crt'), key: file('redis.key') };
}

/** Polls until `check` holds, or fails after `ms`. */
export async function waitFor(
  what: string,
  check: () => Promise<boolean>,
  ms = 20_000,
): Promise<void> {
  await until(() => check().catch(() => false), ms).catch((err: Error) => {
    throw new Error(`${what}: not within ${ms} ms`, { cause: err });
  });
}

/**
 * Redis processes of one test on loopback, each under `timeout` so that none outlives the run,
 * with their files in one temporary directory.
 */
export class RedisServers {
  readonly dir = mkdtempSync(join(tmpdir(), 'sluice-redis-'));
  private readonly children: ChildProcess[] = [];
  private readonly certificates?: { ca: string; cert: string; key: string };

  constructor(readonly security: RedisSecurity = {}) {
    for (const tool of ['redis-server', 'redis-cli', ...(security.tls ? ['openssl'] : [])]) {
      if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) {
        throw new Error(
          `${tool} is not installed: the Redis Cluster and Sentinel tests start their own ` +
            'Redis processes (apt-get install -y redis-server openssl; .ci/run does this).',
        );
      }
    }
    if (security.tls) this.certificates = makeCertificates(this.dir);
  }

  /** The certificate authority's file (PEM) when the servers speak TLS. */
  get caFile(): string | undefined {
    return this.certificates?.ca;
  }

  /**
   * Starts `redis-server <args>` (no persistence) as a Redis node or a Sentinel, with the password
   * and TLS of `security`, and resolves once it answers PING.
   */
  async start(
    port: number,
    args: string[] = [],
    role: 'node' | 'sentinel' = 'node',
  ): Promise<void> {
    const { password, sentinelPassword } = this.security;
    const own = role === 'node' ? password : sentinelPassword;
    const certificates = this.certificates;
    const listen = certificates
      ? [
          '--port',
          '0',
          '--tls-port',
          String(port),
          '--tls-cert-file',
          certificates.cert,
          '--tls-key-file',
          certificates.key,
          '--tls-ca-cert-file',
          certificates.ca,
          '--tls-auth-clients',
          'no',
          // Replicas, Sentinels and the cluster bus speak TLS to each other too.
          '--tls-replication',
          'yes',
          '--tls-cluster',
          'yes',
        ]
      : ['--port', String(port)];
    const auth = [
      ...(own ? ['--requirepass', own] : []),
      ...(role === 'node' && password ? ['--masterauth', password] : []),
    ];
    reach.set(port, { password: own, caFile: certificates?.ca });
    const child = spawn(
      'timeout',
      [
        '--kill-after=5',
        String(LIFETIME_S),
        'redis-server',
        ...args,
        ...listen,
        ...auth,
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        this.dir,
        '--dbfilename',
        `dump-${port}.rdb`,
        // What a failed test shows (logTails) of how a failover went.
        '--logfile',
        this.logFile(port),
        // A replica's first sync at once, not after the default 5 s wait for more replicas.
        '--repl-diskless-sync-delay',
        '0',
      ],
      { stdio: 'ignore' },
    );
    this.children.push(child);
    await waitFor(`redis-server on port ${port}`, async () =>
      (await redisCli(port, 'ping')).includes('PONG'),
    );
  }

  private logFile(port: number): string {
    return join(this.dir, `redis-${port}.log`);
  }

  /** The last lines each server logged, to explain a test that failed. */
  logTails(lines = 12): string {
    return [...reach.keys()]
      .filter((port) => existsSync(this.logFile(port)))
      .map((port) => {
        const log = readFileSync(this.logFile(port), 'utf8').trimEnd().split('\n');
        return `--- redis ${port}\n${log.slice(-lines).join('\n')}`;
      })
      .join('\n');
  }

  /** SIGKILLs the server on `port`: a crash, not a shutdown (its `timeout` parent stays). */
  async kill(port: number): Promise<void> {
    const pid = Number(/process_id:(\d+)/.exec(await redisCli(port, 'info', 'server'))?.[1]);
    process.kill(pid, 'SIGKILL');
  }

  /** Stops every server and removes their files; safe to call twice. */
  async stop(): Promise<void> {
    const running = this.children.filter((c) => c.exitCode === null && c.signalCode === null);
    // `timeout` passes SIGTERM on to its server.
    await Promise.all(
      running.map((child) => {
        const exited = once(child, 'exit');
        child.kill('SIGTERM');
        return exited;
      }),
    );
    rmSync(this.dir, { recursive: true, force: true });
  }
}
