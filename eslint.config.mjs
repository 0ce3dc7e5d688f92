// @ts-check
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import eslint from '@eslint/js';
import tseslint from 'typescript-eslint';
import { importX } from 'eslint-plugin-import-x';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';

/**
 * Module boundaries: an app or a lib is its `src/` folder. A lib is imported by its name
 * (`@app/sql`), never by a file inside it nor by a path; nothing climbs out of its own `src/` with
 * `../` (so apps never import each other, and libs never import apps or reach into another lib),
 * and nothing takes a path from the root (`apps/…`, `libs/…`).
 * no-restricted-imports sees only the specifier, so how many `../` leave `src/` is set per depth.
 */
const UNITS = ['apps', 'libs'];
const foldersIn = (dir) =>
  readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => join(dir, e.name));
/** How deep folders go below a `src/` (0: src/ itself). */
const depthBelow = (dir) => Math.max(0, ...foldersIn(dir).map((d) => 1 + depthBelow(d)));
const maxDepth = Math.max(
  ...UNITS.flatMap((u) => foldersIn(join(import.meta.dirname, u))).map((d) =>
    depthBelow(join(d, 'src')),
  ),
);
/** What may not be imported from a file `depth` folders below a `src/`, and `extra` besides. */
const restrictions = (depth, extra = []) => ({
  'no-restricted-imports': [
    'error',
    {
      patterns: [
        {
          regex: `^(\\.\\./){${depth + 1}}`,
          message:
            'leaves this app or lib: import a lib by its name (@app/…); apps never import each other.',
        },
        {
          regex: '^@app/[^/]+/',
          message: 'import a lib by its name (@app/…), not a file inside it.',
        },
        { regex: '^(apps|libs|test|bench)/', message: 'no paths from the repository root.' },
        ...extra,
      ],
    },
  ],
});
/**
 * apps/cli is the @sluice/cli package, installed without the service: it imports @sluice/client
 * by its published name and no @app lib. apps/api's `sluice` imports it as @sluice/cli; a lib
 * imports no app, by that name either.
 */
const PACKAGE_RULES = [
  {
    files: 'apps/cli/src',
    extra: [
      {
        regex: '^@app/',
        message: '@sluice/cli installs without the service: import @sluice/client, no @app lib.',
      },
    ],
  },
  {
    files: 'libs/*/src',
    extra: [{ regex: '^@sluice/cli$', message: 'a lib imports no app.' }],
  },
];
const boundaries = Array.from({ length: maxDepth + 1 }, (_, depth) => [
  {
    files: UNITS.map((u) => `${u}/*/src/${'*/'.repeat(depth)}*.ts`),
    rules: restrictions(depth),
  },
  ...PACKAGE_RULES.map(({ files, extra }) => ({
    files: [`${files}/${'*/'.repeat(depth)}*.ts`],
    rules: restrictions(depth, extra),
  })),
]).flat();

/** Every Redis connection follows the configured mode (one node, Cluster, Sentinel). */
const REDIS_CONNECTIONS = {
  selector:
    'NewExpression[callee.name=/^(Redis|IORedis|Cluster)$/], NewExpression[callee.property.name=/^(Redis|Cluster)$/]',
  message:
    'make Redis connections with RedisConnector (@app/transport), so that each follows the configured mode.',
};

/** process.exit(1) and the like: the command's exit codes come from EXIT_CODES (exit.codes.ts). */
const LITERAL_EXIT = {
  selector:
    "CallExpression[callee.object.name='process'][callee.property.name='exit'] > Literal, AssignmentExpression[left.object.name='process'][left.property.name='exitCode'] > Literal.right",
  message: 'exit with a code of EXIT_CODES (exit.codes.ts), not a number.',
};

export default tseslint.config(
  {
    ignores: [
      'dist/',
      // What npm pack of libs/client and of apps/cli builds.
      'libs/client/dist/',
      'apps/cli/dist/',
      '.dist-*/',
      'node_modules/',
      'coverage/',
      '.data/',
      'test/artifacts/',
      'bench/**/*.mjs',
      '*.config.js',
      '*.config.mjs',
      // Loaded by jest itself, as jest.config.js is: plain JavaScript, checked by // @ts-check.
      'test/e2e/sequencer.js',
    ],
  },
  eslint.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': [
        'error',
        { considerDefaultExhaustiveForUnions: true },
      ],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
    },
  },
  {
    files: ['**/*.spec.ts', 'test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
    },
  },
  {
    // No import circle: what a module sees at load time must not depend on who imported first.
    files: ['apps/**/*.ts', 'libs/**/*.ts'],
    plugins: { 'import-x': importX },
    settings: {
      // Without these the rule reads no .ts file's imports, and finds no circle.
      'import-x/extensions': ['.ts'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      'import-x/resolver-next': [createTypeScriptImportResolver({ project: 'tsconfig.json' })],
    },
    rules: { 'import-x/no-cycle': 'error' },
  },
  {
    // Every Redis connection follows the configured mode (one node, Cluster, Sentinel): only
    // RedisConnector makes them.
    files: ['apps/**/*.ts', 'libs/**/*.ts'],
    ignores: ['**/*.spec.ts', 'libs/transport/src/redis/redis.connector.ts'],
    rules: { 'no-restricted-syntax': ['error', REDIS_CONNECTIONS] },
  },
  {
    // The command line's exit codes, as docs/cli.md lists them.
    files: ['apps/cli/src/**/*.ts', 'apps/api/src/cli/**/*.ts'],
    ignores: ['**/*.spec.ts'],
    rules: { 'no-restricted-syntax': ['error', REDIS_CONNECTIONS, LITERAL_EXIT] },
  },
  ...boundaries,
);
