import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

/**
 * The apps and libs import one another along the lines DESIGN draws: no import circle (a circle
 * makes what a module sees at load time depend on who imported first), and nothing reaches out of
 * its own `src/` but by a lib's name. The lint holds both over the real code (`npm run lint`, run
 * by CI); this proves each rule fires, so that a plugin upgrade or a missing setting cannot turn
 * one silently off (import-x/no-cycle finds nothing without its `.ts` settings).
 */
const ROOT = join(__dirname, '..');

/**
 * Lints `code` as if it were the file at `filePath`, with the real eslint.config.mjs, in a process
 * of its own (ESLint loads the config with import(), which jest's module system does not serve),
 * with only the named rule and no type information: each message's line and rule.
 */
function lint(rule: string, code: string, filePath: string): [number, string][] {
  const script = `
    const { ESLint } = require('eslint');
    const eslint = new ESLint({
      cwd: process.argv[1],
      overrideConfig: { languageOptions: { parserOptions: { projectService: false } } },
      ruleFilter: ({ ruleId }) => ruleId === process.argv[4],
    });
    eslint.lintText(process.argv[2], { filePath: process.argv[3] }).then(([result]) => {
      process.stdout.write(JSON.stringify(result.messages.map((m) => [m.line, m.ruleId])));
    });`;
  const run = spawnSync(process.execPath, ['-e', script, ROOT, code, join(ROOT, filePath), rule], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 60_000,
  });
  expect(run.stderr).toBe('');
  return JSON.parse(run.stdout) as [number, string][];
}

describe('module boundaries', () => {
  it('lints an import circle as an error, within a lib and through lib names', () => {
    // type.catalog imports json-value.encoder: the encoder importing it back closes a circle.
    const back = "import { TYPE_INFO_SQL } from './type.catalog';\nexport const x = TYPE_INFO_SQL;";
    expect(lint('import-x/no-cycle', back, 'libs/sql/src/json-value.encoder.ts')).toEqual([
      [1, 'import-x/no-cycle'],
    ]);
    // The transport lib imports @app/contracts: a contracts file importing @app/transport closes
    // a circle through both libs' names.
    const user = "import { RedisKeys } from '@app/transport';\nexport const y = RedisKeys;";
    expect(lint('import-x/no-cycle', user, 'libs/contracts/src/status.ts')).toEqual([
      [1, 'import-x/no-cycle'],
    ]);
    // The users lib imports @app/access: an access file importing @app/users closes another.
    const users = "import { UsersService } from '@app/users';\nexport const z = UsersService;";
    expect(lint('import-x/no-cycle', users, 'libs/access/src/pg.login.ts')).toEqual([
      [1, 'import-x/no-cycle'],
    ]);
    // The same files without the import back: no error.
    expect(
      lint('import-x/no-cycle', 'export const x = 1;', 'libs/sql/src/json-value.encoder.ts'),
    ).toEqual([]);
  });

  it('lints as errors the imports that leave an app or a lib, and lets the others through', () => {
    const code = [
      "import { a } from '../../formats/src/encoders';", // 1: into another lib's src/
      "import { b } from '../../../apps/worker/src/main';", // 2: into an app
      "import { c } from '@app/sql/type.catalog';", // 3: a file inside a lib
      "import { d } from 'apps/worker/src/main';", // 4: a path from the root
      "import { e } from '../redis.keys';", // 5: within its own src/
      "import { f } from './port.messages';", // 6
      "import { g } from '@app/contracts';", // 7: a lib by its name
      'export { a, b, c, d, e, f, g };',
    ].join('\n');
    expect(
      lint('no-restricted-imports', code, 'libs/transport/src/in-process/port.messages.ts'),
    ).toEqual([
      [1, 'no-restricted-imports'],
      [2, 'no-restricted-imports'],
      [3, 'no-restricted-imports'],
      [4, 'no-restricted-imports'],
    ]);
  });

  it('lints as errors an @app lib imported by apps/cli (an npm package of its own), and a lib importing it', () => {
    const code = [
      "import { SluiceClient } from '@app/client';", // 1: the service's name of the lib
      "import { loadConfig } from '@app/config';", // 2: the service's settings
      "import { SluiceClientError } from '@sluice/client';", // 3: its published name
      "import { Command } from 'commander';", // 4
      "import { UsageError } from './usage.error';", // 5
      'export { SluiceClient, loadConfig, SluiceClientError, Command, UsageError };',
    ].join('\n');
    expect(lint('no-restricted-imports', code, 'apps/cli/src/client.commands.ts')).toEqual([
      [1, 'no-restricted-imports'],
      [2, 'no-restricted-imports'],
    ]);
    // apps/api's sluice takes it by its package name; a lib never does.
    const user = "import { runSluice } from '@sluice/cli';\nexport const r = runSluice;";
    expect(lint('no-restricted-imports', user, 'apps/api/src/cli/main.ts')).toEqual([]);
    expect(lint('no-restricted-imports', user, 'libs/users/src/users.service.ts')).toEqual([
      [1, 'no-restricted-imports'],
    ]);
  });

  it('lints an exit code of the sluice command given as a number, not from EXIT_CODES', () => {
    const code = [
      "import { EXIT_CODES } from './exit.codes';",
      'process.exit(1);', // 2
      'process.exitCode = 2;', // 3
      'process.exit(EXIT_CODES.failed);',
      'process.exitCode = EXIT_CODES.usage;',
    ].join('\n');
    for (const file of ['apps/cli/src/sluice.ts', 'apps/api/src/cli/main.ts']) {
      expect(lint('no-restricted-syntax', code, file)).toEqual([
        [2, 'no-restricted-syntax'],
        [3, 'no-restricted-syntax'],
      ]);
    }
  });

  it('lints a Redis connection made anywhere but in RedisConnector', () => {
    const code = [
      "import Redis, { Cluster } from 'ioredis';",
      "import * as ioredis from 'ioredis';",
      "export const a = new Redis('redis://127.0.0.1:6379');", // 3
      "export const b = new Cluster([{ host: '127.0.0.1', port: 7000 }]);", // 4
      'export const c = new ioredis.Cluster([]);', // 5
      'export const d = a.duplicate();', // 6: a copy of one made by RedisConnector
    ].join('\n');
    expect(
      lint('no-restricted-syntax', code, 'apps/worker/src/health/heartbeat.service.ts'),
    ).toEqual([
      [3, 'no-restricted-syntax'],
      [4, 'no-restricted-syntax'],
      [5, 'no-restricted-syntax'],
    ]);
    expect(
      lint('no-restricted-syntax', code, 'libs/transport/src/redis/redis.connector.ts'),
    ).toEqual([]);
  });
});
