import { ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Every Redis process a test starts dies by itself after this long, whatever befalls the test. */
const LIFETIME_S = 1200;

/** `redis-cli -p <port> <args>`: its output. */
export async function redisCli(port: number, ...args: string[]): Promise<string> {
  const { stdout } = await run('redis-cli', ['-p', String(port), ...args]);
  return stdout;
}

/** Polls until `check` holds, or fails after `ms`. */
export async function waitFor(
  what: string,
  check: () => Promise<boolean>,
  ms = 20_000,
): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Redis processes of one test on loopback, each under `timeout` so that none outlives the run,
 * with their files in one temporary directory.
 */
export class RedisServers {
  readonly dir = mkdtempSync(join(tmpdir(), 'sluice-redis-'));
  private readonly children: ChildProcess[] = [];

  /** Starts `redis-server <args>` (no persistence) and resolves once it answers PING. */
  async start(port: number, args: string[] = []): Promise<void> {
    const child = spawn(
      'timeout',
      [
        '--kill-after=5',
        String(LIFETIME_S),
        'redis-server',
        ...args,
        '--port',
        String(port),
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
