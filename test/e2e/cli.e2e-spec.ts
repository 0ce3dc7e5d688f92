import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:http';
import { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tableFromIPC } from 'apache-arrow';
import { duckdb } from '@test/support/duckdb.reader';
import { applicationNameOf, closeDb, db, e2eEnv, eventually, request } from './support/client';
import { claimsOf, executeAs, signToken } from './support/users';
import { ROOT, SLUICE_BIN, freePort, randomName } from './support/service';

let home: string;
let work: string;

/** The environment of a user's shell: a config dir of its own, the service's URL. */
function userEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    HOME: home,
    XDG_CONFIG_HOME: join(home, 'config'),
    SLUICE_URL: e2eEnv().baseUrl,
    ...extra,
  };
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `sluice …` piped (no terminal), to its end. */
async function sluice(args: string[], env = userEnv(), input = ''): Promise<Run> {
  const child = spawn(process.execPath, [SLUICE_BIN, ...args], {
    env,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  return finished(child, input);
}

async function finished(child: ChildProcess, input = ''): Promise<Run> {
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  child.stdin?.end(input);
  const [code] = (await once(child, 'close')) as [number | null];
  return { code, stdout, stderr };
}

/** Runs `sluice …` in a pseudo-terminal (util-linux script): what a terminal would show. */
async function inTerminal(args: string, env = userEnv()): Promise<Run> {
  const command = `${process.execPath} ${SLUICE_BIN} ${args}`;
  const child = spawn('script', ['-qfec', command, '/dev/null'], {
    env: { ...env, TERM: 'xterm', COLUMNS: '120' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  return finished(child);
}

/** The backend running a statement that carries `marker`, as Sluice names it (applicationNameOf). */
async function backendWith(marker: string): Promise<string | undefined> {
  const { rows } = await db().query<{ name: string }>(
    `select application_name as name from pg_stat_activity
      where application_name like 'sluice:%' and query like '%' || $1 || '%'
        and query not like '%pg_stat_activity%'`,
    [marker],
  );
  return rows[0]?.name;
}

async function backendsNamed(name: string): Promise<number> {
  const { rows } = await db().query<{ n: number }>(
    'select count(*)::int as n from pg_stat_activity where application_name = $1',
    [name],
  );
  return rows[0].n;
}

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'sluice-cli-home-'));
  work = mkdtempSync(join(tmpdir(), 'sluice-cli-work-'));
  const env = e2eEnv();
  const login = await sluice(
    ['login'],
    userEnv({ SLUICE_USER: env.adminUser, SLUICE_PASSWORD: env.adminPassword }),
  );
  expect(login).toMatchObject({ code: 0, stdout: '' });
});

afterAll(async () => {
  rmSync(home, { recursive: true, force: true });
  rmSync(work, { recursive: true, force: true });
  await closeDb();
});

describe('sluice (the command line)', () => {
  it('logs in from the environment without a terminal, keeping the token 0600 and never the password', () => {
    const file = join(home, 'config', 'sluice', 'credentials.json');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const stored = JSON.parse(readFileSync(file, 'utf8')) as Record<string, string>;
    expect(stored).toEqual({
      url: e2eEnv().baseUrl,
      username: e2eEnv().adminUser,
      token: expect.stringMatching(/^[\w-]+\.[\w-]+\.[\w-]+$/),
    });
    expect(readFileSync(file, 'utf8')).not.toContain(e2eEnv().adminPassword);
  });

  it('asks for the password on a terminal without echoing it, and keeps only the token', async () => {
    const env = e2eEnv();
    const config = join(work, 'tty-config');
    const child = spawn(
      'script',
      [
        '-qfec',
        `${process.execPath} ${SLUICE_BIN} login --url ${env.baseUrl} --user ${env.adminUser}`,
        '/dev/null',
      ],
      {
        env: { ...userEnv(), XDG_CONFIG_HOME: config, TERM: 'xterm' },
        stdio: ['pipe', 'pipe', 'pipe'],
      },
    );
    let shown = '';
    child.stdout.on('data', (d: Buffer) => (shown += d.toString()));
    await eventually(() => Promise.resolve(shown.includes('Password: ') ? true : undefined));
    // Typed once the prompt is up, as a person would.
    await new Promise((r) => setTimeout(r, 300));
    child.stdin.write(`${env.adminPassword}\r`);
    const [code] = (await once(child, 'close')) as [number | null];
    child.stdin.destroy();
    expect(code).toBe(0);
    expect(shown).toMatch(/logged in to/);
    expect(shown).not.toContain(env.adminPassword);
    const file = join(config, 'sluice', 'credentials.json');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, 'utf8')).not.toContain(env.adminPassword);
  });

  it('asks a terminal for the URL (offering the default), the user and the password', async () => {
    const env = e2eEnv();
    const config = join(work, 'tty-asked-config');
    const asked = userEnv({ XDG_CONFIG_HOME: config, TERM: 'xterm' });
    delete asked.SLUICE_URL;
    delete asked.SLUICE_USER;
    delete asked.SLUICE_PASSWORD;
    const child = spawn(
      'script',
      ['-qfec', `${process.execPath} ${SLUICE_BIN} login`, '/dev/null'],
      {
        env: asked,
        stdio: ['pipe', 'pipe', 'pipe'],
      },
    );
    let shown = '';
    child.stdout.on('data', (d: Buffer) => (shown += d.toString()));
    // Each answer typed once its question is up, as a person would.
    const answer = async (question: string, typed: string) => {
      await eventually(() => Promise.resolve(shown.includes(question) ? true : undefined));
      await new Promise((r) => setTimeout(r, 200));
      child.stdin.write(`${typed}\r`);
    };
    await answer('Sluice URL [http://127.0.0.1:8080]: ', env.baseUrl);
    await answer('User: ', env.adminUser);
    await answer('Password: ', env.adminPassword);
    const [code] = (await once(child, 'close')) as [number | null];
    child.stdin.destroy();
    expect(code).toBe(0);
    expect(shown).toContain(`logged in to ${env.baseUrl}`);
    const stored = JSON.parse(readFileSync(join(config, 'sluice', 'credentials.json'), 'utf8')) as {
      url: string;
      username: string;
    };
    expect(stored).toMatchObject({ url: env.baseUrl, username: env.adminUser });
  });

  it('logs in with the password piped on stdin, as the standalone banner says', async () => {
    const env = e2eEnv();
    const config = join(work, 'piped-config');
    const noUrl = userEnv({ XDG_CONFIG_HOME: config });
    delete noUrl.SLUICE_URL;
    const piped = await sluice(
      ['login', '--url', env.baseUrl, '--user', env.adminUser],
      noUrl,
      `${env.adminPassword}\n`,
    );
    expect(piped).toMatchObject({ code: 0, stdout: '' });
    expect(piped.stderr).toMatch(/^logged in to /);
    const stored = readFileSync(join(config, 'sluice', 'credentials.json'), 'utf8');
    expect(stored).not.toContain(env.adminPassword);
    // Nothing piped and nothing set: the reason names both ways.
    const none = await sluice(['login', '--user', env.adminUser], noUrl, '');
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/no password: pipe it on stdin or set SLUICE_PASSWORD/);
  });

  it('prints its version with --version, and lists the option in sluice help', async () => {
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      version: string;
    };
    for (const flag of ['--version', '-V']) {
      expect(await sluice([flag])).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
    }
    const help = await sluice(['help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/-V, --version +print the version of sluice/);
  });

  it('refreshes the stored token before it expires, and keeps the new one', async () => {
    const config = join(work, 'refresh-config');
    const res = await request(
      { username: e2eEnv().adminUser, password: e2eEnv().adminPassword },
      { path: '/v1/login', baseUrl: e2eEnv().baseUrl },
    );
    // A real login's token, re-signed to have 20 s left of a 40 s life: past half of it, so a
    // refresh is due (a process that starts slowly still has ample time before it expires).
    const now = Math.floor(Date.now() / 1000);
    const short = signToken(
      { ...claimsOf(res.json.access_token), iat: now - 20, exp: now + 20 },
      e2eEnv().jwtSecret,
    );
    mkdirSync(join(config, 'sluice'), { recursive: true });
    const file = join(config, 'sluice', 'credentials.json');
    writeFileSync(
      file,
      JSON.stringify({ url: e2eEnv().baseUrl, username: e2eEnv().adminUser, token: short }),
      { mode: 0o600 },
    );
    const env = { ...userEnv(), XDG_CONFIG_HOME: config };
    expect((await sluice(['query', 'select 1 as one'], env)).code).toBe(0);
    const kept = (JSON.parse(readFileSync(file, 'utf8')) as { token: string }).token;
    expect(kept).not.toBe(short);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    // The refresh revoked the old token; the kept one works for the next command.
    expect((await executeAs(short, { statement: 'select 1' })).status).toBe(401);
    expect((await sluice(['query', 'select 2 as two'], env)).stdout).toBe('two\r\n2\r\n');
  });

  it('writes clean CSV when piped, with no progress line', async () => {
    const run = await sluice([
      'query',
      "select g, 'a,b' as s, null::int as z from generate_series(1, 3) g",
    ]);
    expect(run).toEqual({
      code: 0,
      stdout: 'g,s,z\r\n1,"a,b",\r\n2,"a,b",\r\n3,"a,b",\r\n',
      stderr: '',
    });
  });

  it('takes the statement from a file, {name} values from --param, and writes JSON or NDJSON', async () => {
    const file = join(work, 'q.sql');
    writeFileSync(file, 'select {n}::int + 1 as n, {s}::text as s, {j}::jsonb as j');
    const args = [
      'query',
      '-f',
      file,
      '--param',
      'n=41',
      '--param',
      's=hello',
      '-p',
      'j={"k":[1]}',
    ];
    const json = await sluice([...args, '--format', 'json']);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual([{ n: 42, s: 'hello', j: { k: [1] } }]);
    const ndjson = await sluice([...args, '--format', 'ndjson']);
    expect(ndjson.stdout).toBe('{"n":42,"s":"hello","j":{"k":[1]}}\n');
    const stdin = await sluice(
      ['query', '-f', '-', '--max-rows', '2'],
      userEnv(),
      'select generate_series(1, 5) as g',
    );
    expect(stdin).toMatchObject({ code: 0, stdout: 'g\r\n1\r\n2\r\n' });
    const exported = await sluice(['export', 'select 1 as n', '--format', 'csv']);
    expect(exported).toMatchObject({ code: 0, stdout: 'n\r\n1\r\n', stderr: '' });
  });

  it('prints the reason, SQLSTATE and query id of an error, with its exit code', async () => {
    const early = await sluice(['query', 'select * from no_such_table_cli']);
    expect(early.code).toBe(1);
    expect(early.stderr).toMatch(/no_such_table_cli/);
    expect(early.stderr).toMatch(/SQLSTATE 42P01 {2}vendor code -600 {2}HTTP 400/);
    const late = await sluice([
      'query',
      '--format',
      'ndjson',
      'select 1 / (5000 - g) as x from generate_series(1, 10000) g',
    ]);
    expect(late.code).toBe(1);
    expect(late.stderr).toMatch(/division by zero/);
    expect(late.stderr).toMatch(/SQLSTATE 22012 .*query id [0-9a-f-]{36}/);
    const usage = await sluice(['query', '--format', 'xml', 'select 1']);
    expect(usage.code).toBe(2);
    const help = await sluice(['users', 'help']);
    expect(help).toMatchObject({ code: 0, stdout: expect.stringMatching(/^Usage: sluice users/) });
    const nobody = await sluice(['queries'], { ...userEnv(), XDG_CONFIG_HOME: join(work, 'none') });
    expect(nobody.code).toBe(3);
    expect(nobody.stderr).toMatch(/not logged in/);
    const byEnv = await sluice(['query', 'select 1 as one'], {
      ...userEnv({ SLUICE_USER: e2eEnv().adminUser, SLUICE_PASSWORD: e2eEnv().adminPassword }),
      XDG_CONFIG_HOME: join(work, 'none'),
    });
    expect(byEnv).toMatchObject({ code: 0, stdout: 'one\r\n1\r\n' });
  });

  it('exits 3 when the credentials are refused, and 4 when the service cannot be reached', async () => {
    const nobody = join(work, 'nobody');
    const refused = await sluice(
      ['login'],
      userEnv({
        XDG_CONFIG_HOME: nobody,
        SLUICE_USER: randomName('cli_nobody'),
        SLUICE_PASSWORD: 'wrong-password',
      }),
    );
    expect(refused.code).toBe(3);
    expect(refused.stderr).toMatch(/SQLSTATE 28P01 {2}vendor code -304 {2}HTTP 401/);
    expect(existsSync(join(nobody, 'sluice', 'credentials.json'))).toBe(false);
    const closed = `http://127.0.0.1:${await freePort()}`;
    const unreachable = await sluice(
      ['query', 'select 1'],
      userEnv({
        XDG_CONFIG_HOME: nobody,
        SLUICE_URL: closed,
        SLUICE_USER: e2eEnv().adminUser,
        SLUICE_PASSWORD: e2eEnv().adminPassword,
      }),
    );
    expect(unreachable.code).toBe(4);
    expect(unreachable.stdout).toBe('');
  });

  it('exits 4 when the service answers 429 or 503, the answers worth retrying', async () => {
    // A fake service: what is checked is the command's reading of these answers; the service's
    // own 429 and 503 are the catalogue's, tested where they are made.
    const answers = {
      429: { reason: 'too many queries', sql_state: '53000', vendor_code: -108 },
      503: { reason: 'the query queue is not reachable', sql_state: '57P03', vendor_code: -109 },
    };
    let status: 429 | 503 = 429;
    const server = createServer((req, res) => {
      res.setHeader('content-type', 'application/json');
      if (req.url === '/v1/login') {
        res.end(JSON.stringify({ access_token: 'stub-token' }));
        return;
      }
      res.writeHead(status, { 'retry-after': '1' });
      res.end(JSON.stringify({ status: answers[status] }));
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const env = userEnv({
        XDG_CONFIG_HOME: join(work, 'busy'),
        SLUICE_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        SLUICE_USER: 'someone',
        SLUICE_PASSWORD: 'secret',
      });
      const busy = await sluice(['query', 'select 1'], env);
      expect(busy.code).toBe(4);
      expect(busy.stderr).toMatch(/SQLSTATE 53000 {2}vendor code -108 {2}HTTP 429/);
      status = 503;
      const away = await sluice(['query', 'select 1'], env);
      expect(away.code).toBe(4);
      expect(away.stderr).toMatch(/SQLSTATE 57P03 {2}vendor code -109 {2}HTTP 503/);
    } finally {
      server.close();
    }
  });

  it('uses a stored login for its own URL only: the same service under another URL gets no token', async () => {
    const own = await sluice(['query', 'select 1 as one']);
    expect(own).toMatchObject({ code: 0, stdout: 'one\r\n1\r\n' });
    const elsewhere = e2eEnv().baseUrl.replace('127.0.0.1', 'localhost');
    const other = await sluice(['query', 'select 1 as one'], userEnv({ SLUICE_URL: elsewhere }));
    expect(other.code).toBe(3);
    expect(other.stdout).toBe('');
    expect(other.stderr).toContain(`not logged in to ${elsewhere}`);
  });

  it('sends --database, --schema and --timeout as the request fields of the same names', async () => {
    const where = await sluice([
      'query',
      '--database',
      'postgres',
      '--schema',
      'pg_catalog',
      'select current_database() as d, current_schemas(false)::text as s',
    ]);
    expect(where).toMatchObject({ code: 0, stdout: 'd,s\r\npostgres,{pg_catalog}\r\n' });
    const slow = await sluice(['query', '--timeout', '200', 'select pg_sleep(5)']);
    expect(slow.code).toBe(1);
    expect(slow.stderr).toMatch(/SQLSTATE 57014 {2}vendor code -1122 {2}HTTP 504/);
  });

  it('lists queries, and cancels one by id', async () => {
    const listed = await sluice(['queries', '--json']);
    expect(listed.code).toBe(0);
    const queries = JSON.parse(listed.stdout) as { query_id: string }[];
    expect(queries.length).toBeGreaterThan(0);
    const cancelled = await sluice(['cancel', queries[0].query_id]);
    expect(cancelled.code).toBe(0);
    expect(cancelled.stdout).toMatch(new RegExp(`^${queries[0].query_id} [a-z]+\n$`));
    const unknown = await sluice(['cancel', '00000000-0000-4000-8000-000000000000']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/HTTP 404/);
  });

  it('prints a compact table on a terminal, numbers right-aligned, and nothing else on stdout', async () => {
    // stderr away from the terminal: what is left is stdout alone, a terminal still.
    const alone = await inTerminal(
      `query "select g as n, 'x' || g as label from generate_series(9, 11) g" 2>/dev/null`,
    );
    expect(alone.code).toBe(0);
    expect(alone.stdout.replace(/\r\n/g, '\n')).toBe(
      [
        '┌────┬───────┐',
        '│  n │ label │',
        '├────┼───────┤',
        '│  9 │ x9    │',
        '│ 10 │ x10   │',
        '│ 11 │ x11   │',
        '└────┴───────┘',
        '',
      ].join('\n'),
    );
    // The row count goes to stderr, which the terminal shows too.
    const both = await inTerminal(`query "select 1 as a, 'x' as bee"`);
    expect(both.stdout).toMatch(/│ a │ bee │\r\n├───┼─────┤\r\n│ 1 │ x {3}│/);
    expect(both.stdout).toMatch(/\(1 row\)/);
  });

  it('lists queries as a table on a terminal and as CSV when piped, as query does', async () => {
    const piped = await sluice(['queries']);
    expect(piped.code).toBe(0);
    expect(piped.stdout).toMatch(
      /^query_id,owner,state,lane,elapsed_ms,rows,bytes,statement\r\n[0-9a-f-]{36},/,
    );
    const shown = await inTerminal('queries');
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/│ query_id +│ owner +│ state +│/);
    const asJson = await sluice(['queries', '--format', 'json']);
    expect(Array.isArray(JSON.parse(asJson.stdout))).toBe(true);
  });

  it('shows a progress line on a terminal during an export, and ends the line cleanly', async () => {
    const out = join(work, 'slow.csv');
    const run = await inTerminal(
      `export "select g, case when g % 40000 = 0 then pg_sleep(0.3) end as s from generate_series(1, 200000) g" -o ${out}`,
    );
    expect(run.code).toBe(0);
    // stdout has nothing here: what the terminal shows is stderr's progress line.
    const text = run.stdout;
    const line = /(\d[\d,]*) rows {2}[\d.]+ [kMG]?B {2}[\d.]+ [kMG]?B\/s {2}\d+:\d\d/;
    expect(text).toMatch(line);
    // The last drawing has every row, then the line ends and the cursor is shown again.
    const drawings = [...text.matchAll(new RegExp(line, 'g'))];
    expect(drawings.at(-1)![1]).toBe('200,000');
    expect(text).toContain('\u001b[?25h');
    expect(text.endsWith('\n')).toBe(true);
    expect(readFileSync(out, 'utf8').split('\r\n').length).toBe(200_002);
  });

  it('cancels the query on the server on Ctrl-C during an export, exits 130 and leaves no partial file', async () => {
    const marker = randomName('cli_sigint');
    const dir = mkdtempSync(join(work, 'sigint-'));
    // CSV: its first bytes come with the first rows, so the interrupt lands mid-file.
    const out = join(dir, 'out.csv');
    const child = spawn(
      process.execPath,
      [
        SLUICE_BIN,
        'export',
        `select g, pg_sleep(0.0005), '${marker}' as m from generate_series(1, 1000000) g`,
        '-o',
        out,
      ],
      { env: userEnv(), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const done = finished(child);
    const backend = await eventually(() => backendWith(marker), 20_000);
    // Let bytes reach the temporary file first.
    await eventually(
      () => Promise.resolve(readdirSync(dir).some((f) => f.endsWith('.part')) ? true : undefined),
      20_000,
    );
    child.kill('SIGINT');
    const run = await done;
    expect(run.code).toBe(130);
    expect(run.stderr).toMatch(/interrupted/);
    const queryId = /query id ([0-9a-f-]{36})/.exec(run.stderr)?.[1];
    expect(queryId && applicationNameOf(queryId)).toBe(backend);
    await eventually(async () => ((await backendsNamed(backend)) === 0 ? true : undefined));
    expect(readdirSync(dir)).toEqual([]);
  });

  it('leaves no file behind an export that fails after its first bytes, and says why with exit 1', async () => {
    const dir = mkdtempSync(join(work, 'failed-'));
    // Rows go to the file before the division by zero ends the statement.
    const run = await sluice([
      'export',
      'select g, 1 / (20000 - g) as x from generate_series(1, 30000) g',
      '-o',
      join(dir, 'out.csv'),
    ]);
    expect(readdirSync(dir)).toEqual([]);
    // The server cuts a failed export's connection: the command asks the query why, not exit 4.
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/division by zero/);
    expect(run.stderr).toMatch(/SQLSTATE 22012 .*query id [0-9a-f-]{36}/);
  });

  it('compresses a Parquet export with the codec --compression names, and refuses it for other formats', async () => {
    const out = join(work, 'snappy.parquet');
    const run = await sluice([
      'export',
      "select g, 'row ' || g as t from generate_series(1, 1000) g",
      '--compression',
      'snappy',
      '-o',
      out,
    ]);
    expect(run).toMatchObject({ code: 0, stderr: '' });
    const file = readFileSync(out);
    expect(await duckdb(file, 'select distinct compression from parquet_metadata(FILE)')).toEqual([
      { compression: 'SNAPPY' },
    ]);
    expect(await duckdb(file, 'select count(*) as n, max(t) as t from read_parquet(FILE)')).toEqual(
      [{ n: '1000', t: 'row 999' }],
    );
    const csv = await sluice(['export', 'select 1', '--compression', 'gzip', '--format', 'csv']);
    expect(csv.code).not.toBe(0);
    expect(csv.stderr).toMatch(/--compression is for Parquet, not csv/);
    const unknown = await sluice(['export', 'select 1', '--compression', 'lz4', '-o', out]);
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toMatch(/zstd, snappy, gzip, none/);
  });

  it('writes an export in the format its file extension names: Arrow, NDJSON, JSON', async () => {
    const statement = "select g as n, 'row ' || g as t from generate_series(1, 3) g";
    const written = async (name: string): Promise<Buffer> => {
      const out = join(work, name);
      const run = await sluice(['export', statement, '-o', out]);
      expect([name, run.code]).toEqual([name, 0]);
      return readFileSync(out);
    };
    const arrow = tableFromIPC(await written('out.arrow'));
    const rows = arrow.toArray() as { toJSON(): Record<string, unknown> }[];
    expect(rows.map((row) => row.toJSON())).toEqual([
      { n: 1, t: 'row 1' },
      { n: 2, t: 'row 2' },
      { n: 3, t: 'row 3' },
    ]);
    for (const name of ['out.ndjson', 'out.jsonl']) {
      const lines = (await written(name))
        .toString()
        .trimEnd()
        .split('\n')
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(lines[0]).toMatchObject({ schema: [{ name: 'n' }, { name: 't' }] });
      expect(lines.slice(1, -1).flatMap((line) => line.data as unknown[])).toEqual([
        [1, 'row 1'],
        [2, 'row 2'],
        [3, 'row 3'],
      ]);
      expect(lines[lines.length - 1]).toMatchObject({ status: { sql_state: '00000' } });
    }
    expect(JSON.parse((await written('out.json')).toString())).toMatchObject({
      data: [
        [1, 'row 1'],
        [2, 'row 2'],
        [3, 'row 3'],
      ],
      status: { sql_state: '00000' },
    });
  });

  it('exports 1M rows to a Parquet file that a Parquet reader reads back whole', async () => {
    const out = join(work, 'million.parquet');
    const run = await sluice([
      'export',
      'select g, md5(g::text) as h from generate_series(1, 1000000) g',
      '-o',
      out,
    ]);
    expect(run).toMatchObject({ code: 0, stderr: '' });
    expect(readdirSync(work).filter((f) => f.startsWith('.million'))).toEqual([]);
    const listed = JSON.parse((await sluice(['queries', '--json'])).stdout) as {
      statement: string;
      lane: string;
      rows: number;
    }[];
    expect(listed.find((q) => q.statement.includes('md5(g::text)'))).toMatchObject({
      lane: 'export',
      rows: 1_000_000,
    });
    const reader = `
      const { parquetMetadata, parquetReadObjects } = require('hyparquet');
      const { compressors } = require('hyparquet-compressors');
      const data = require('node:fs').readFileSync(process.argv[1]);
      const file = data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength);
      parquetReadObjects({ file, compressors }).then((rows) => process.stdout.write(JSON.stringify({
        numRows: Number(parquetMetadata(file).num_rows), read: rows.length,
        first: rows[0], last: rows[rows.length - 1],
      }, (k, v) => typeof v === 'bigint' ? Number(v) : v)));`;
    const read = spawnSync(process.execPath, ['-e', reader, out], { cwd: ROOT, encoding: 'utf8' });
    expect(read.stderr).toBe('');
    expect(JSON.parse(read.stdout)).toEqual({
      numRows: 1_000_000,
      read: 1_000_000,
      first: { g: 1, h: 'c4ca4238a0b923820dcc509a6f75849b' },
      last: { g: 1_000_000, h: expect.stringMatching(/^[0-9a-f]{32}$/) },
    });
  });
});
