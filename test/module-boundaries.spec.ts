import { spawnSync } from 'node:child_process';
import { join, relative } from 'node:path';
import * as ts from 'typescript';

/**
 * The apps and libs import one another along the lines DESIGN draws: no import circle (a circle
 * makes what a module sees at load time depend on who imported first), and nothing reaches out of
 * its own `src/` but by a lib's name (the lint's no-restricted-imports, proven here to fire).
 */
const ROOT = join(__dirname, '..');

/** Every apps/ and libs/ source file → the apps/ and libs/ files it imports, resolved as tsc does. */
function importGraph(): Map<string, string[]> {
  const config = ts.getParsedCommandLineOfConfigFile(join(ROOT, 'tsconfig.json'), undefined, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (d) => {
      throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    },
  })!;
  const inUnit = (file: string) => /^(apps|libs)\//.test(relative(ROOT, file));
  const graph = new Map<string, string[]>();
  for (const file of config.fileNames.filter(inUnit)) {
    const { importedFiles } = ts.preProcessFile(ts.sys.readFile(file)!, true, true);
    const targets = importedFiles
      .map(
        ({ fileName }) =>
          ts.resolveModuleName(fileName, file, config.options, ts.sys).resolvedModule,
      )
      .filter((m) => m !== undefined && !m.isExternalLibraryImport && inUnit(m.resolvedFileName))
      .map((m) => relative(ROOT, m!.resolvedFileName));
    graph.set(relative(ROOT, file), targets);
  }
  return graph;
}

/** The import circles: strongly connected components of more than one file, or a self-import. */
function circles(graph: Map<string, string[]>): string[][] {
  // Tarjan's algorithm.
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next += 1;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || graph.get(v)!.includes(v)) found.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

describe('module boundaries', () => {
  it('has no import circle among the apps and libs', () => {
    const graph = importGraph();
    // The graph is really there: the api imports the libs, a lib its own files.
    expect(graph.get('apps/api/src/app.module.ts')!.length).toBeGreaterThan(0);
    expect(graph.get('libs/sql/src/type.catalog.ts')).toContain('libs/sql/src/type.info.ts');
    expect(circles(graph)).toEqual([]);
  });

  it('finds a circle when there is one', () => {
    const graph = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts']],
      ['c.ts', ['a.ts', 'd.ts']],
      ['d.ts', []],
      ['e.ts', ['e.ts']],
    ]);
    expect(circles(graph)).toEqual([['a.ts', 'b.ts', 'c.ts'], ['e.ts']]);
  });

  it('lints as errors the imports that leave an app or a lib, and lets the others through', () => {
    // The real eslint.config.mjs, in a process of its own (ESLint loads it with import(), which
    // jest's module system does not serve), with only this rule and no type information.
    const script = `
      const { ESLint } = require('eslint');
      const eslint = new ESLint({
        cwd: process.argv[1],
        overrideConfig: { languageOptions: { parserOptions: { projectService: false } } },
        ruleFilter: ({ ruleId }) => ruleId === 'no-restricted-imports',
      });
      const code = process.argv[2];
      eslint.lintText(code, { filePath: process.argv[3] }).then(([result]) => {
        process.stdout.write(JSON.stringify(result.messages.map((m) => [m.line, m.ruleId])));
      });`;
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
    const run = spawnSync(
      process.execPath,
      ['-e', script, ROOT, code, join(ROOT, 'libs/transport/src/in-process/port.messages.ts')],
      { cwd: ROOT, encoding: 'utf8', timeout: 60_000 },
    );
    expect(run.stderr).toBe('');
    expect(JSON.parse(run.stdout)).toEqual([
      [1, 'no-restricted-imports'],
      [2, 'no-restricted-imports'],
      [3, 'no-restricted-imports'],
      [4, 'no-restricted-imports'],
    ]);
  });
});
