import 'reflect-metadata';
import { RequestMethod } from '@nestjs/common';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { loadConfig } from '@app/config';
import { ERROR_CATALOGUE, EXECUTE_QUEUE, MEDIA_TYPES, pgErrorKind } from '@app/contracts';
import {
  CreateUserDto,
  ExecuteRequestDto,
  LoginRequestDto,
  UpdateUserDto,
} from '@app/http-contracts';
import { RedisKeys } from '@app/transport';
import { SluiceClient } from '@app/client';
import { cliProgram } from '../apps/cli/src/cli.program';
import type { ClientCommands } from '../apps/cli/src/client.commands';
import { EXIT_CODES } from '../apps/cli/src/exit.codes';
import { refusePasswordArguments } from '../apps/cli/src/users.program';
import { DASHBOARD_PATH } from '../apps/api/src/admin/queue-dashboard.service';
import type { EmbeddedDatabase } from '../apps/api/src/standalone/embedded.database';
import { banner, loginLine } from '../apps/api/src/standalone/standalone.bootstrap';

/**
 * The user documentation (README.md, docs/*.md) checked against the code: the error catalogue,
 * the routes, request and response fields, headers, metrics, Redis keys, configuration variables
 * and their defaults, commands, and every relative link. A change to any of them that the
 * documents do not follow fails here.
 */

// Metadata keys of Nest's route decorators and of @nestjs/swagger's property decorators (the
// packages do not export their constants); the tests below fail if they find nothing under them.
const PATH_METADATA = 'path';
const METHOD_METADATA = 'method';
const API_MODEL_PROPERTIES = 'swagger/apiModelProperties';
const API_MODEL_PROPERTIES_ARRAY = 'swagger/apiModelPropertiesArray';

const ROOT = join(__dirname, '..');
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');
const DOCS = readdirSync(join(ROOT, 'docs'))
  .filter((f) => f.endsWith('.md'))
  .map((f) => `docs/${f}`);
const DOCUMENTS = ['README.md', ...DOCS];
const api = read('docs/api.md');
const architecture = read('docs/architecture.md');
const everything = DOCUMENTS.map(read).join('\n');

// ---------------------------------------------------------------------------------------------
// Markdown, as far as these documents use it.

/** The text with fenced code blocks blanked out (their lines kept, so headings stay headings). */
function prose(md: string): string {
  let fenced = false;
  return md
    .split('\n')
    .map((line) => {
      if (/^\s*```/.test(line)) {
        fenced = !fenced;
        return '';
      }
      return fenced ? '' : line;
    })
    .join('\n');
}

/** The lines inside fenced code blocks. */
function codeLines(md: string): string[] {
  let fenced = false;
  const out: string[] = [];
  for (const line of md.split('\n')) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    else if (fenced) out.push(line);
  }
  return out;
}

interface Table {
  header: string[];
  rows: string[][];
}

const cells = (line: string) =>
  line
    .trim()
    .replace(/^\|/, '')
    .replace(/\|$/, '')
    .split('|')
    .map((c) => c.trim());

function tables(md: string): Table[] {
  const lines = prose(md).split('\n');
  const found: Table[] = [];
  for (let i = 0; i + 1 < lines.length; i++) {
    if (!lines[i].trim().startsWith('|') || !/^\|(\s*:?-+:?\s*\|)+\s*$/.test(lines[i + 1].trim())) {
      continue;
    }
    const table: Table = { header: cells(lines[i]), rows: [] };
    let j = i + 2;
    for (; j < lines.length && lines[j].trim().startsWith('|'); j++)
      table.rows.push(cells(lines[j]));
    found.push(table);
    i = j;
  }
  return found;
}

/** The one table of `md` whose header is exactly `header`. */
function table(md: string, header: string[]): Table {
  const matching = tables(md).filter((t) => t.header.join('|') === header.join('|'));
  expect({ header, found: matching.length }).toEqual({ header, found: 1 });
  return matching[0];
}

/** The text under a heading, up to the next heading of the same or a higher level. */
function section(md: string, heading: string): string {
  const lines = prose(md).split('\n');
  const start = lines.findIndex((l) => l.replace(/^#+\s+/, '') === heading && /^#+\s/.test(l));
  expect({ heading, found: start >= 0 }).toEqual({ heading, found: true });
  const level = /^#+/.exec(lines[start])![0].length;
  const end = lines.findIndex(
    (l, i) => i > start && /^#+\s/.test(l) && /^#+/.exec(l)![0].length <= level,
  );
  return lines.slice(start, end < 0 ? undefined : end).join('\n');
}

const untick = (cell: string) => cell.replace(/`/g, '').trim();
const column = (t: Table, name: string) => {
  const at = t.header.indexOf(name);
  expect({ name, in: t.header.join('|'), at: at >= 0 }).toMatchObject({ at: true });
  return t.rows.map((r) => r[at]);
};

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .replace(/`/g, '')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

function anchors(md: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of prose(md).split('\n')) {
    const m = /^#{1,6}\s+(.*)$/.exec(line);
    if (!m) continue;
    const base = slug(m[1]);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The code's side.

/** Every route the api's controllers declare, as `METHOD /path` with parameters as `{}`. */
async function controllerRoutes(): Promise<string[]> {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (name.endsWith('.controller.ts')) files.push(path);
    }
  };
  walk(join(ROOT, 'apps/api/src'));
  expect(files.length).toBeGreaterThan(5);
  const routes: string[] = [];
  for (const file of files) {
    const exported = (await import(file)) as Record<string, unknown>;
    for (const value of Object.values(exported)) {
      if (typeof value !== 'function') continue;
      const base = Reflect.getMetadata(PATH_METADATA, value) as string | undefined;
      if (base === undefined) continue;
      const proto = (value as { prototype: Record<string, unknown> }).prototype;
      for (const name of Object.getOwnPropertyNames(proto)) {
        const handler = proto[name];
        if (name === 'constructor' || typeof handler !== 'function') continue;
        const path = Reflect.getMetadata(PATH_METADATA, handler) as string | undefined;
        const method = Reflect.getMetadata(METHOD_METADATA, handler) as RequestMethod | undefined;
        if (path === undefined || method === undefined) continue;
        const full = [base, path].filter((p) => p && p !== '/').join('/');
        routes.push(`${RequestMethod[method]} /${full.replace(/^\/+/, '')}`);
      }
    }
  }
  return routes.map(normaliseRoute);
}

function normaliseRoute(route: string): string {
  return route.replace(/:[A-Za-z_]+/g, '{}').replace(/\{[^}]*\}/g, '{}');
}

/** The members of an exported interface, as declared in its source file. */
function interfaceMembers(path: string, name: string): string[] {
  const source = read(path);
  const start = source.indexOf(`export interface ${name}`);
  expect(start).toBeGreaterThanOrEqual(0);
  const body = source.slice(source.indexOf('{', start) + 1, source.indexOf('\n}', start));
  return [...body.matchAll(/^ {2}([a-z_]+)\??:/gm)].map((m) => m[1]);
}

/** The fields a DTO declares for OpenAPI (and so for validation), with whether they are required. */
function dtoFields(dto: { prototype: object }): Map<string, boolean> {
  const names = (Reflect.getMetadata(API_MODEL_PROPERTIES_ARRAY, dto.prototype) ?? []) as string[];
  return new Map(
    names.map((n) => {
      const name = n.replace(/^:/, '');
      const meta = Reflect.getMetadata(API_MODEL_PROPERTIES, dto.prototype, name) as
        { required?: boolean } | undefined;
      return [name, meta?.required !== false];
    }),
  );
}

/** Every variable the configuration reads. */
function configVariables(): string[] {
  const source = read('libs/config/src/sluice.config.ts');
  const names = new Set<string>();
  for (const m of source.matchAll(
    /\b(?:str|int|url|lanes|addresses|byteSize)\(\s*env,\s*'([A-Z][A-Z0-9_]*)'/g,
  ))
    names.add(m[1]);
  for (const m of source.matchAll(/\benv\.([A-Z][A-Z0-9_]*)/g)) names.add(m[1]);
  return [...names].sort();
}

function envExampleVariables(): string[] {
  return [...read('.env.example').matchAll(/^([A-Z][A-Z0-9_]*)=/gm)].map((m) => m[1]).sort();
}

/** Every file of the repository that is text we wrote (no dependencies, builds or data). */
function repositoryFiles(): string[] {
  const skip = new Set(['node_modules', '.git', 'dist', '.data', 'artifacts', 'coverage']);
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      if (skip.has(name)) continue;
      const path = join(dir, name);
      const stat = statSync(path);
      if (stat.isDirectory()) walk(path);
      else if (stat.size < 4 * 1024 * 1024) out.push(path);
    }
  };
  walk(ROOT);
  return out;
}

// ---------------------------------------------------------------------------------------------

describe('docs/api.md', () => {
  describe('error catalogue', () => {
    const catalogue = () =>
      table(api, ['Code', 'HTTP', 'sql_state', 'vendor_code', 'Meaning']).rows.map(
        ([code, http, sqlState, vendorCode]) => ({
          code: untick(code),
          http: Number(http),
          sqlState: untick(sqlState),
          vendorCode: Number(vendorCode),
        }),
      );

    it('has a row for every code of the catalogue, with its HTTP status, SQLSTATE and vendor code', () => {
      const documented = new Map(catalogue().map((row) => [row.code, row]));
      for (const [code, entry] of Object.entries(ERROR_CATALOGUE)) {
        expect({ code, ...documented.get(code) }).toEqual({
          code,
          http: entry.http,
          sqlState: entry.sqlState,
          vendorCode: entry.vendorCode,
        });
      }
    });

    it('has no row for a code the catalogue does not have, and no code twice', () => {
      const codes = catalogue().map((row) => row.code);
      expect(codes.filter((c) => !(c in ERROR_CATALOGUE))).toEqual([]);
      expect(new Set(codes).size).toBe(codes.length);
    });

    it('maps every SQLSTATE in its PostgreSQL table to the code pgErrorKind() picks', () => {
      const rows = table(api, ['SQLSTATE', 'Code']).rows;
      expect(rows.length).toBeGreaterThan(10);
      for (const [states, code] of rows) {
        const listed = [...states.matchAll(/`([0-9A-Z]{2}(?:[0-9A-Z]{3}|xxx))`/g)].map((m) => m[1]);
        expect({ states, listed: listed.length > 0 }).toEqual({ states, listed: true });
        for (const state of listed) {
          // A class (`22xxx`) stands for any code in it that has no row of its own.
          expect({ state, code: pgErrorKind(state.replace(/x/g, '9')) }).toEqual({
            state,
            code: untick(code),
          });
        }
      }
    });

    it('lists every SQLSTATE and class pgErrorKind() names', () => {
      const source = read('libs/contracts/src/error.catalogue.ts');
      const body = source.slice(source.indexOf('export function pgErrorKind'));
      const fn = body.slice(0, body.indexOf('\n}\n'));
      const exact = [
        ...[...fn.matchAll(/case '([0-9A-Z]{5})'/g)].map((m) => m[1]),
        ...[...fn.matchAll(/=== '([0-9A-Z]{5})'/g)].map((m) => m[1]),
      ];
      const classes = [...fn.matchAll(/case '([0-9A-Z]{2})'/g)].map((m) => `${m[1]}xxx`);
      expect(exact.length).toBeGreaterThan(5);
      expect(classes.length).toBeGreaterThan(5);
      const documented = table(api, ['SQLSTATE', 'Code'])
        .rows.map(([states]) => states)
        .join(' ');
      for (const state of [...exact, ...classes]) {
        expect({ state, documented: documented.includes(`\`${state}\``) }).toEqual({
          state,
          documented: true,
        });
      }
    });
  });

  it('lists exactly the routes the api serves', async () => {
    const main = read('apps/api/src/main.ts');
    const docsPath = /SwaggerModule\.setup\('([^']+)'/.exec(main)?.[1];
    const jsonPath = /jsonDocumentUrl: '([^']+)'/.exec(main)?.[1];
    expect([docsPath, jsonPath]).toEqual([expect.any(String), expect.any(String)]);
    const served = [
      ...(await controllerRoutes()),
      `GET ${DASHBOARD_PATH}`,
      `GET /${docsPath}`,
      `GET /${jsonPath}`,
    ];
    const documented = table(api, ['Method and path', 'Auth', 'What it does']).rows.map(([route]) =>
      normaliseRoute(untick(route)),
    );
    expect(served).toContain('POST /v1/execute/{}');
    expect([...documented].sort()).toEqual([...new Set(served)].sort());
  });

  it('describes every field of an execute request, and which one is required', () => {
    const fields = dtoFields(ExecuteRequestDto);
    expect(fields.get('statement')).toBe(true);
    const rows = table(section(api, 'Request fields'), [
      'Field',
      'Type',
      'Default',
      'Meaning',
    ]).rows;
    expect(rows.map(([f]) => untick(f)).sort()).toEqual([...fields.keys()].sort());
    for (const [field, type] of rows) {
      expect({ field, required: type.includes('required') }).toEqual({
        field,
        required: fields.get(untick(field)),
      });
    }
  });

  it('describes every field of a login, and which one is required', () => {
    const fields = dtoFields(LoginRequestDto);
    const rows = table(section(api, 'POST /v1/login'), [
      'Field',
      'Type',
      'Required',
      'Meaning',
    ]).rows;
    expect(rows.map(([f]) => untick(f)).sort()).toEqual([...fields.keys()].sort());
    for (const [field, , required] of rows) {
      expect({ field, required: required === 'yes' }).toEqual({
        field,
        required: fields.get(untick(field)),
      });
    }
  });

  it('describes every field of a user, required to create it or not, and which can change', () => {
    const create = dtoFields(CreateUserDto);
    const update = dtoFields(UpdateUserDto);
    const rows = table(section(api, 'Users'), [
      'Field',
      'Type',
      'Create',
      'Change',
      'Meaning',
    ]).rows;
    expect(rows.map(([f]) => untick(f)).sort()).toEqual([...create.keys()].sort());
    for (const [cell, , creating, changing] of rows) {
      const field = untick(cell);
      expect({ field, required: creating === 'required', changes: changing !== '' }).toEqual({
        field,
        required: create.get(field),
        changes: update.has(field),
      });
    }
  });

  it('describes every member of a query as /v1/queries shows it', () => {
    const members = interfaceMembers('libs/contracts/src/query.info.ts', 'QueryInfo');
    expect(members).toContain('queue_position');
    const rows = table(section(api, 'Queries'), ['Member', 'Meaning']).rows;
    expect(rows.map(([m]) => untick(m)).sort()).toEqual([...members].sort());
  });

  it('describes every member of /v1/info', () => {
    const members = interfaceMembers('apps/api/src/health/info.controller.ts', 'InfoResponse');
    expect(members).toContain('default_database');
    const rows = table(section(api, 'GET /v1/info'), ['Member', 'Meaning']).rows;
    expect(rows.map(([m]) => untick(m)).sort()).toEqual([...members].sort());
  });

  it('names every media type the service produces', () => {
    for (const type of Object.values(MEDIA_TYPES)) expect(api).toContain(`\`${type}\``);
    expect(read('apps/api/src/execute/media.negotiator.ts')).toContain('application\\/x-ndjson');
    expect(api).toContain('`application/x-ndjson`');
  });

  it('describes every header execute reads and sets', () => {
    const controller = read('apps/api/src/execute/execute.controller.ts');
    const read_ = [
      ...[...controller.matchAll(/headers\['([a-z-]+)'\]/g)].map((m) => m[1]),
      ...[...controller.matchAll(/headers\.([a-z]+)\b/g)].map((m) => m[1]),
    ];
    const set = [...controller.matchAll(/\.header\('([a-z-]+)'/g)].map((m) => m[1]);
    expect(read_).toEqual(
      expect.arrayContaining(['accept', 'accept-encoding', 'preferred-compression-level']),
    );
    expect(set).toEqual(expect.arrayContaining(['content-type', 'x-query-id']));
    const requestHeaders = column(table(api, ['Header', 'Meaning']), 'Header').join(' ');
    const responseHeaders = column(table(api, ['Header', 'When']), 'Header').join(' ');
    for (const name of read_) expect(requestHeaders.toLowerCase()).toContain(`\`${name}\``);
    for (const name of set) expect(responseHeaders.toLowerCase()).toContain(`\`${name}\``);
    // Set elsewhere: the challenge of every 401, and the wait of every 429.
    expect(read('apps/api/src/auth/auth.challenge.ts')).toContain("'WWW-Authenticate'");
    expect(read('apps/api/src/execute/admission.service.ts')).toContain("'Retry-After'");
    expect(responseHeaders).toContain('`WWW-Authenticate`');
    expect(responseHeaders).toContain('`Retry-After`');
    expect(requestHeaders).toContain('`Authorization`');
    expect(requestHeaders).toContain('`Content-Type`');
  });
});

describe('docs/architecture.md', () => {
  it('lists every metric the api, the workers and the pool export', () => {
    const sources = [
      'apps/api/src/metrics/api-metrics.service.ts',
      'apps/worker/src/metrics/worker-metrics.service.ts',
      'libs/execution/src/pool/pool.metrics.ts',
      'libs/config/src/heap.growth.ts',
    ];
    const exported = new Set(
      sources.flatMap((s) => [...read(s).matchAll(/name: '(sluice_[a-z_]+)'/g)].map((m) => m[1])),
    );
    expect(exported.size).toBeGreaterThan(10);
    const documented = table(section(architecture, 'Metrics'), [
      'Metric',
      'Where',
      'Meaning',
    ]).rows.map(([m]) => untick(m).replace(/\{.*\}$/, ''));
    expect([...documented].sort()).toEqual([...exported].sort());
  });

  it('shows every Redis key as RedisKeys builds it', () => {
    const keys = new RedisKeys('sluice');
    const proto = RedisKeys.prototype as unknown as Record<string, unknown>;
    const built: string[] = [];
    for (const name of Object.getOwnPropertyNames(RedisKeys.prototype)) {
      if (name === 'constructor') continue;
      const descriptor = Object.getOwnPropertyDescriptor(RedisKeys.prototype, name)!;
      if (descriptor.get) {
        built.push(String((keys as unknown as Record<string, unknown>)[name]));
      } else if (typeof proto[name] === 'function') {
        const args: Record<string, string[]> = {
          userSlots: ['<username>'],
          userQueries: ['<username>'],
          userKept: ['<username>'],
          idempotency: ['<username>', '<sha256 of the key>'],
          idempotencyKeys: ['<username>'],
          wake: ['<reader_id>'],
        };
        const build = proto[name] as (...a: string[]) => string;
        built.push(build.call(keys, ...(args[name] ?? ['<query_id>'])));
      }
    }
    expect(built.length).toBeGreaterThan(6);
    const section_ = section(architecture, "A query's path");
    for (const key of built) expect(section_).toContain(`\`${key}`);
    expect(section_).toContain(`\`${keys.bullPrefix}:${EXECUTE_QUEUE}:`);
  });

  it('has a row for every configuration variable, and for nothing else', () => {
    const documented = table(section(architecture, 'Configuration'), [
      'Variable',
      'Default',
      'Meaning',
    ]).rows.map(([v]) => untick(v));
    expect([...documented].sort()).toEqual(configVariables());
  });
});

describe('the documents', () => {
  it('mention every variable of .env.example and of the configuration', () => {
    const example = envExampleVariables();
    expect(example.length).toBeGreaterThan(30);
    expect(example.filter((v) => !configVariables().includes(v))).toEqual([]);
    for (const name of [...example, ...configVariables()]) {
      expect({ name, mentioned: everything.includes(`\`${name}\``) }).toEqual({
        name,
        mentioned: true,
      });
    }
  });

  it('give the defaults the configuration has', () => {
    const base = loadConfig({});
    let checked = 0;
    for (const file of DOCUMENTS) {
      for (const t of tables(read(file))) {
        const v = t.header.indexOf('Variable');
        const d = t.header.indexOf('Default');
        if (v < 0 || d < 0) continue;
        for (const row of t.rows) {
          const name = untick(row[v]);
          const value = /^`([^`\s]+)`$/.exec(row[d])?.[1] ?? /^(\d+)$/.exec(row[d])?.[1];
          if (value === undefined) continue;
          expect(configVariables()).toContain(name);
          expect({ file, name, config: loadConfig({ [name]: value }) }).toEqual({
            file,
            name,
            config: base,
          });
          if (/^\d+$/.test(value)) {
            // The variable is read at all: another value changes the configuration.
            const other = String(Number(value) + 1);
            expect({ name, same: isEqual(loadConfig({ [name]: other }), base) }).toEqual({
              name,
              same: false,
            });
          }
          checked++;
        }
      }
    }
    expect(checked).toBeGreaterThan(40);
  });

  it('run only npm scripts that exist, and sluice commands the CLI takes', async () => {
    const scripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> })
      .scripts;
    let cli = 0;
    for (const file of DOCUMENTS) {
      const text = read(file);
      for (const m of text.matchAll(/\bnpm run ([\w:.-]+)/g)) {
        expect({ file, script: m[1], exists: m[1] in scripts }).toEqual({
          file,
          script: m[1],
          exists: true,
        });
      }
      for (const m of text.matchAll(/\bnpm (start|test)\b/g)) expect(scripts).toHaveProperty(m[1]);
      for (const line of codeLines(text)) {
        // The users commands, as npx runs them from a checkout (or through the npm script).
        const at = line.search(/(npm run sluice -- |npx sluice )users /);
        if (at < 0) continue;
        const argv = line.slice(line.indexOf('users ', at)).trim().split(/\s+/);
        expect({ file, line, ran: await runsAs(argv) }).toEqual({
          file,
          line,
          ran: expect.stringMatching(/^(users|help)$/),
        });
        cli++;
      }
    }
    expect(cli).toBeGreaterThanOrEqual(5);
  });

  it('keep the Quick start at exactly two commands', () => {
    const quick = section(read('README.md'), 'Quick start');
    expect(quick).toBeDefined();
    const readme = read('README.md');
    const block = readme.slice(readme.indexOf('## Quick start'));
    const commands = block
      .slice(block.indexOf('```sh') + 5, block.indexOf('```', block.indexOf('```sh') + 5))
      .split('\n')
      .filter((l) => l.trim() !== '');
    expect(commands).toEqual(['npm ci && npm start', 'npm test']);
  });

  it('show the banner exactly as npm start prints it, and its login line in Use it', () => {
    const readme = read('README.md');
    const quick = readme.slice(readme.indexOf('## Quick start'), readme.indexOf('## Use it'));
    const shown = /\n```\n(Sluice is serving[\s\S]*?)```/.exec(quick)?.[1];
    // The generated password, shown as "…" in the README.
    const printed = banner(
      {
        config: { ...loadConfig({}), adminUser: 'admin', adminPassword: '…' },
        embedded: {} as EmbeddedDatabase,
        generatedPassword: true,
      },
      'http://127.0.0.1:8080',
    );
    expect(shown).toBe(`${printed.trim()}\n`);
    const useIt = readme.slice(readme.indexOf('## Use it'), readme.indexOf('## Documentation'));
    expect(useIt).toContain(
      `\n${loginLine('http://127.0.0.1:8080', '{"username":"admin","password":"…"}')}\n`,
    );
  });

  it('link only to files and headings that exist', () => {
    let links = 0;
    for (const file of DOCUMENTS) {
      const text = prose(read(file)).replace(/`[^`]*`/g, '');
      for (const m of text.matchAll(/\[[^\]]*\]\(([^)\s]+)\)/g)) {
        const target = m[1];
        if (/^[a-z]+:/i.test(target)) continue;
        const [path, anchor] = target.split('#');
        const resolved = path === '' ? join(ROOT, file) : resolve(dirname(join(ROOT, file)), path);
        expect({ file, target, exists: existsSync(resolved) }).toEqual({
          file,
          target,
          exists: true,
        });
        expect(relative(ROOT, resolved).startsWith('..')).toBe(false);
        if (anchor !== undefined && resolved.endsWith('.md')) {
          expect({
            file,
            target,
            found: anchors(readFileSync(resolved, 'utf8')).has(anchor),
          }).toEqual({ file, target, found: true });
        }
        links++;
      }
    }
    expect(links).toBeGreaterThan(20);
  });

  it('are linked from the README', () => {
    const readme = read('README.md');
    for (const doc of DOCS) expect(readme).toContain(`](${doc})`);
  });

  it('point nowhere outside the repository: no private workspace, no design notes', () => {
    // Built from parts so that this file does not name what it looks for.
    const outside = [['..', 'shared'].join('/'), ['', 'work', 'shared'].join('/')];
    const offenders = repositoryFiles().filter((path) => {
      const text = readFileSync(path, 'latin1');
      return outside.some((o) => text.includes(o));
    });
    expect(offenders.map((p) => relative(ROOT, p))).toEqual([]);
    for (const note of ['DESIGN', 'STYLE'].map((n) => `${n}.md`)) {
      expect({ note, mentioned: everything.includes(note) }).toEqual({ note, mentioned: false });
    }
  });
});

/** The words of a shell command line, as far as the documents quote them ('…' and "…"). */
function shellWords(line: string): string[] {
  return [...line.matchAll(/"([^"]*)"|'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2] ?? m[3]);
}

/**
 * What `sluice <argv>` would run, parsed by the command's own program: the client command's name,
 * `users`, or `help` when only help was printed. Every action only notes that it was reached.
 */
async function runsAs(argv: string[]): Promise<string | undefined> {
  let ran: string | undefined;
  const client = new Proxy({} as ClientCommands, {
    get: (_target, name) => () => Promise.resolve((ran = String(name))),
  });
  const program = cliProgram({
    client: () => client,
    users: () => Promise.resolve(((ran = 'users'), 0)),
    exitCode: () => undefined,
  }).configureOutput({ writeErr: () => undefined, writeOut: () => undefined });
  refusePasswordArguments(argv);
  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (err) {
    // Help printed (exit code 0) is a command the CLI takes; anything else is not.
    if ((err as { exitCode?: number }).exitCode !== 0) throw err;
  }
  return ran ?? 'help';
}

describe('docs/cli.md and the sluice examples', () => {
  const cli = read('docs/cli.md');

  it('lists every exit code the command uses, and no other', () => {
    const codes = column(table(section(cli, 'Errors and exit codes'), ['Code', 'Meaning']), 'Code');
    expect(codes.map((c) => Number(untick(c))).sort((a, b) => a - b)).toEqual(
      Object.values(EXIT_CODES).sort((a, b) => a - b),
    );
  });

  it('show only sluice command lines that the command takes', async () => {
    const documents = [...DOCUMENTS, 'libs/client/README.md'];
    let checked = 0;
    for (const file of documents) {
      for (const line of codeLines(read(file))) {
        const at = line.indexOf('npx sluice ');
        if (at < 0) continue;
        const argv = shellWords(line.slice(at + 'npx sluice '.length));
        expect({ file, line, ran: (await runsAs(argv)) !== undefined }).toEqual({
          file,
          line,
          ran: true,
        });
        checked++;
      }
    }
    expect(checked).toBeGreaterThanOrEqual(10);
  });

  it("use only the client's own methods in their TypeScript examples", () => {
    let checked = 0;
    for (const file of ['README.md', 'libs/client/README.md']) {
      const md = read(file);
      const blocks = [...md.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
      expect(blocks.length).toBeGreaterThan(0);
      for (const code of blocks) {
        for (const m of code.matchAll(/\bsluice\.(\w+)\(/g)) {
          expect({
            file,
            method: m[1],
            found: typeof SluiceClient.prototype[m[1] as keyof SluiceClient],
          }).toEqual({
            file,
            method: m[1],
            found: 'function',
          });
          checked++;
        }
      }
    }
    expect(checked).toBeGreaterThanOrEqual(6);
  });
});

function isEqual(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
