import { execFile, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { rawExchange, rawRequestText } from './support/raw';
import { ROOT, ServiceProcess, freePort, startProcess, waitForApi } from './support/service';

const run = promisify(execFile);

/** Starts `npm start`'s entry point with nothing configured but where to keep its data. */
async function startStandalone(
  dataDir: string,
  port: number,
  pgPort: number,
  env: Record<string, string> = {},
): Promise<ServiceProcess> {
  const proc = startProcess('api', {
    PORT: String(port),
    HOST: '127.0.0.1',
    SLUICE_DATA_DIR: dataDir,
    SLUICE_EMBEDDED_PG_PORT: String(pgPort),
    ...env,
  });
  await waitForApi(`http://127.0.0.1:${port}`, proc, 90_000);
  // The banner is printed right after the port opens.
  for (let i = 0; i < 50 && !proc.output().includes('curl -s'); i++)
    await new Promise((r) => setTimeout(r, 100));
  return proc;
}

async function postgresAnswers(pgPort: number, password: string): Promise<boolean> {
  const client = new Client({
    connectionString: `postgresql://postgres:${password}@127.0.0.1:${pgPort}/postgres`,
  });
  try {
    await client.connect();
    await client.end();
    return true;
  } catch {
    return false;
  }
}

describe('standalone mode (npm start)', () => {
  const dataDir = join(tmpdir(), `sluice-standalone-${randomBytes(4).toString('hex')}`);
  let proc: ServiceProcess | undefined;

  afterAll(async () => {
    await proc?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  let pgPort = 0;
  let state: { adminPassword: string; superuserPassword: string };

  it('serves with no configuration, prints sluice and curl examples that return rows, restarts on the same data and stops its PostgreSQL', async () => {
    const port = await freePort();
    pgPort = await freePort();
    proc = await startStandalone(dataDir, port, pgPort);
    // Lines logged before the banner but written late would show up by now.
    await new Promise((r) => setTimeout(r, 400));
    const output = proc.output();
    expect(output).toContain(`Sluice is serving on http://127.0.0.1:${port}`);
    // Piped: JSON lines only, every one of them before the banner, which stays in view.
    // (Only the access lines of this spec's own requests, polling /v1/info, may follow it.)
    const after = output.slice(output.indexOf('Sluice is serving')).split('\n');
    expect(after.filter((l) => l.startsWith('{"level"') && !l.includes('"req":'))).toEqual([]);
    expect(output).not.toContain('[Nest]');
    expect(output).toMatch(/"context":"EmbeddedDatabase"/);
    state = JSON.parse(readFileSync(join(dataDir, 'standalone.json'), 'utf8')) as typeof state;
    expect(output).toContain(`admin user: admin   password: ${state.adminPassword}`);
    expect(output).toContain(`In a browser: http://127.0.0.1:${port}/admin `);

    // Run the two printed lines exactly as a newcomer would paste them.
    const lines = output
      .split('\n')
      .filter((l) => /^\s+(TOKEN=|curl )/.test(l))
      .map((l) => l.trim());
    expect(lines).toHaveLength(2);
    const { stdout } = await run('bash', ['-c', lines.join('\n')]);
    const body = JSON.parse(stdout) as { data: unknown[][]; status: { sql_state: string } };
    expect(body.status.sql_state).toBe('00000');
    expect(body.data[0]).toEqual(['Tokyo', 'Japan', 37194000]);

    // A mistyped password: the login line fails and says why, and the next call names the cause.
    const mistyped = lines[0].replace(state.adminPassword, 'mistyped');
    const failed = await run('bash', ['-c', `${mistyped}\n${lines[1]}`]).catch(
      (err: { code: number; stdout: string; stderr: string }) => err,
    );
    expect(failed.stderr).toMatch(/curl: \(22\).*401/);
    expect(failed.stderr).toMatch(
      /login failed: \{"status":\{"reason":"[^"]+","sql_state":"28P01"/,
    );
    expect(JSON.parse(failed.stdout)).toMatchObject({
      status: { reason: expect.stringMatching(/Bearer followed by text that is not a token/) },
    });
    const loginOnly = await run('bash', ['-c', mistyped]).then(
      () => 0,
      (err: { code: number }) => err.code,
    );
    expect(loginOnly).not.toBe(0);

    // The sluice lines too, without a terminal: the password piped, as the banner says.
    expect(output).toContain('login asks for the password, or reads it piped on stdin');
    const sluiceLines = output
      .split('\n')
      .filter((l) => /^\s+npx sluice /.test(l))
      .map((l) => l.trim());
    expect(sluiceLines).toHaveLength(2);
    const home = join(dataDir, 'home');
    const piped = `printf '%s\\n' '${state.adminPassword}' | ${sluiceLines[0]} && ${sluiceLines[1]}`;
    const viaSluice = await run('bash', ['-c', piped], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: home, XDG_CONFIG_HOME: join(home, 'config') },
    });
    expect(viaSluice.stdout).toMatch(/^name,country,population\r\nTokyo,Japan,37194000\r\n/);

    // With nothing configured it answers the loopback names, not a name rebound to its address.
    const loginAs = (host: string) =>
      rawExchange(
        `http://127.0.0.1:${port}`,
        rawRequestText(
          'POST /v1/login HTTP/1.1',
          ['Content-Type: application/json'],
          JSON.stringify({ username: 'admin', password: state.adminPassword }),
          host,
        ),
      );
    const rebound = await loginAs(`attacker.example:${port}`);
    expect(rebound.status).toBe(421);
    expect(rebound.json.status).toMatchObject({
      vendor_code: -704,
      reason: expect.stringContaining(`Host "attacker.example:${port}" is not allowed`),
    });
    for (const host of [`localhost:${port}`, `[::1]:${port}`, `127.0.0.1:${port}`]) {
      expect({ host, status: (await loginAs(host)).status }).toEqual({ host, status: 200 });
    }
    expect(proc.output()).not.toContain('SLUICE_ALLOWED_HOSTS');

    // Something made in the first run is still there after a restart, with the same password.
    const token = /TOKEN=\$\(curl -sS --fail-with-body (\S+) .* -d '([^']+)'/.exec(lines[0])!;
    const login = await fetch(token[1], {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: token[2],
    });
    const { access_token } = (await login.json()) as { access_token: string };
    const made = await fetch(`http://127.0.0.1:${port}/v1/execute`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${access_token}` },
      body: JSON.stringify({ statement: 'create table public.kept as select 42 as answer' }),
    });
    expect(made.status).toBe(200);

    await proc.stop('SIGTERM');
    expect(await postgresAnswers(pgPort, state.superuserPassword)).toBe(false);

    proc = await startStandalone(dataDir, port, pgPort);
    expect(proc.output()).toContain(`password: ${state.adminPassword}`);
    const again = await run('bash', [
      '-c',
      [
        lines[0],
        `curl -s http://127.0.0.1:${port}/v1/execute -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' -d '{"statement":"select answer from public.kept"}'`,
      ].join('\n'),
    ]);
    expect((JSON.parse(again.stdout) as { data: unknown }).data).toEqual([[42]]);
    expect(existsSync(join(dataDir, 'pg', 'PG_VERSION'))).toBe(true);
  }, 180_000);

  it('refuses a second start on data in use, and after a SIGKILL stops the PostgreSQL left behind and serves', async () => {
    // A second `npm start` in the same folder, while the first runs: a clear refusal.
    const second = startProcess('api', {
      PORT: String(await freePort()),
      HOST: '127.0.0.1',
      SLUICE_DATA_DIR: dataDir,
      SLUICE_EMBEDDED_PG_PORT: String(pgPort),
    });
    const [code] = (await once(second.child, 'exit')) as [number];
    expect(code).toBe(1);
    expect(second.output()).toMatch(
      /in use by process \d+ \(another Sluice on this data directory\?\)/,
    );

    // Killed without a chance to stop it, Sluice leaves its PostgreSQL running...
    await proc!.stop('SIGKILL');
    expect(await postgresAnswers(pgPort, state.superuserPassword)).toBe(true);
    // ...which the next start stops before it starts its own.
    const port = await freePort();
    proc = await startStandalone(dataDir, port, pgPort);
    expect(proc.output()).toMatch(
      /stopping PostgreSQL \d+, left running on .* by a Sluice that did not stop/,
    );
    expect(proc.output()).toContain(`Sluice is serving on http://127.0.0.1:${port}`);
    await proc.stop('SIGTERM');
    expect(await postgresAnswers(pgPort, state.superuserPassword)).toBe(false);
  }, 180_000);
});

describe('standalone mode on SIGTERM', () => {
  const dataDir = join(tmpdir(), `sluice-sigterm-${randomBytes(4).toString('hex')}`);
  let proc: ServiceProcess | undefined;
  let port: number;
  let pgPort: number;
  let state: { adminPassword: string; superuserPassword: string };

  beforeAll(async () => {
    [port, pgPort] = [await freePort(), await freePort()];
  });

  afterEach(async () => {
    await proc?.stop('SIGKILL');
    proc = undefined;
  });

  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  async function start(env: Record<string, string> = {}): Promise<string> {
    proc = await startStandalone(dataDir, port, pgPort, env);
    state = JSON.parse(readFileSync(join(dataDir, 'standalone.json'), 'utf8')) as typeof state;
    const login = await fetch(`http://127.0.0.1:${port}/v1/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'admin', password: state.adminPassword }),
    });
    return ((await login.json()) as { access_token: string }).access_token;
  }

  /** Resolves with the status and the whole body; rejects when the response is cut short. */
  async function execute(statement: string, bearer: string): Promise<[number, string]> {
    const res = await fetch(`http://127.0.0.1:${port}/v1/execute`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${bearer}` },
      body: JSON.stringify({ statement }),
    });
    return [res.status, await res.text()];
  }

  /** Waits until the embedded PostgreSQL runs a statement that holds `marker`. */
  async function running(marker: string): Promise<void> {
    const client = new Client({
      connectionString: `postgresql://postgres:${state.superuserPassword}@127.0.0.1:${pgPort}/postgres`,
    });
    await client.connect();
    try {
      for (let i = 0; i < 200; i++) {
        const { rows } = await client.query<{ n: number }>(
          "select count(*)::int as n from pg_stat_activity where application_name like 'sluice:%' and query like $1",
          [`%${marker}%`],
        );
        if (rows[0].n === 1) return;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`statement ${marker} did not start`);
    } finally {
      await client.end();
    }
  }

  /** What a clean shutdown never prints: errors, and the pool's threads ended under a task. */
  function expectCleanOutput(output: string): void {
    expect(output).not.toMatch(/"level":(50|60)/);
    expect(output).not.toMatch(/Terminating worker thread|failed in the pool|Unhandled/i);
  }

  it('finishes the response in flight with 200 and the whole body, then exits with 0', async () => {
    const bearer = await start();
    const marker = `sigterm_${randomBytes(3).toString('hex')}`;
    const pending = execute(`select pg_sleep(1.5), '${marker}' as m`, bearer);
    await running(marker);
    const code = await proc!.stop('SIGTERM');
    const [status, text] = await pending;
    expect(status).toBe(200);
    const body = JSON.parse(text) as { data: unknown; status: { sql_state: string } };
    expect(body.data).toEqual([['', marker]]);
    expect(body.status.sql_state).toBe('00000');
    expect(code).toBe(0);
    expectCleanOutput(proc!.output());
    // Said while it waits, and at the very end.
    expect(proc!.output()).toContain('stopping… (waiting for 1 query)\n');
    expect(proc!.output()).toMatch(/\nstopped\n$/);
    expect(await postgresAnswers(pgPort, state.superuserPassword)).toBe(false);
  }, 120_000);

  it('keeps the thread pool until a query that outlives the grace period has ended', async () => {
    // The client is cut off after the grace period and its statement cancelled; this statement
    // goes on for a second after the cancel, and the pool must not be torn down under it.
    const bearer = await start({ SLUICE_SHUTDOWN_GRACE_MS: '500' });
    const marker = `outlives_${randomBytes(3).toString('hex')}`;
    const pending = execute(
      `DO $$BEGIN PERFORM pg_sleep(30); EXCEPTION WHEN query_canceled THEN PERFORM pg_sleep(1); END$$ -- ${marker}`,
      bearer,
    ).then(
      () => 'answered',
      () => 'cut off',
    );
    await running(marker);
    const signalled = Date.now();
    const code = await proc!.stop('SIGTERM');
    // Grace (0.5 s), then the cancel, then the second the statement still takes.
    expect(Date.now() - signalled).toBeGreaterThanOrEqual(1_400);
    expect(await pending).toBe('cut off');
    expect(code).toBe(0);
    expectCleanOutput(proc!.output());
  }, 120_000);
});

describe('standalone mode on a terminal', () => {
  const dataDir = join(tmpdir(), `sluice-tty-${randomBytes(4).toString('hex')}`);

  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('logs readable lines, prints the banner last, and says stopping… and stopped on Ctrl-C', async () => {
    const [port, pgPort] = [await freePort(), await freePort()];
    // util-linux script: a pseudo-terminal, as `npm start` in a terminal has.
    const main = join(ROOT, 'dist', 'apps', 'api', 'src', 'main.js');
    const child = spawn('script', ['-qfec', `exec ${process.execPath} ${main}`, '/dev/null'], {
      env: {
        PATH: process.env.PATH ?? '',
        TERM: 'xterm',
        PORT: String(port),
        HOST: '127.0.0.1',
        SLUICE_DATA_DIR: dataDir,
        SLUICE_EMBEDDED_PG_PORT: String(pgPort),
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let shown = '';
    child.stdout.on('data', (d: Buffer) => (shown += d.toString()));
    const closed = once(child, 'close');
    try {
      for (let i = 0; i < 900 && !shown.includes('In a browser:'); i++)
        await new Promise((r) => setTimeout(r, 100));
      await new Promise((r) => setTimeout(r, 400));
      const screen = shown.replace(/\r\n/g, '\n');
      expect(screen).toMatch(
        /^\d\d:\d\d:\d\d INFO {2}\[EmbeddedDatabase\] initialising PostgreSQL/m,
      );
      expect(screen).toMatch(/^\d\d:\d\d:\d\d INFO {2}\[QueryPoolService\] interactive pool/m);
      expect(screen).not.toMatch(/"level":|RouterExplorer|\[Nest\]/);
      // Nothing after the banner: it ends the screen.
      expect(screen).toMatch(/In a browser: .*\n+$/);
    } finally {
      // Ctrl-C, as the terminal sends it to the process (script runs node in place of a shell).
      const node = Number(
        execFileSync('pgrep', ['-P', String(child.pid)])
          .toString()
          .trim(),
      );
      process.kill(node, 'SIGINT');
      await closed;
    }
    const screen = shown.replace(/\r\n/g, '\n');
    expect(screen).toMatch(/\nstopping…\n/);
    expect(screen).toMatch(/\nstopped\n$/);
  }, 120_000);
});
