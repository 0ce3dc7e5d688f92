import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';

/**
 * libs/client is published on its own and depends on nothing, so it copies the server's types of
 * what it reads (`GET /v1/queries`, the status object, a spooled result's manifest) rather than importing them. The copies are
 * checked here against the server's: the same fields, each of a type that fits both ways, compiled
 * with the project's own settings.
 */
const ROOT = join(__dirname, '..');
const SAME = 'type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;';

/** The compiler's errors for `source`, a file within the project (its rootDir and paths apply). */
function errorsOf(source: string): string[] {
  const cache = join(ROOT, 'node_modules', '.cache');
  mkdirSync(cache, { recursive: true });
  const dir = mkdtempSync(join(cache, 'sluice-types-'));
  try {
    const file = join(dir, 'check.ts');
    writeFileSync(file, source);
    const config = ts.getParsedCommandLineOfConfigFile(
      join(ROOT, 'tsconfig.json'),
      {},
      { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => undefined },
    )!;
    const program = ts.createProgram([file], {
      ...config.options,
      noEmit: true,
      rootDir: undefined,
    });
    return ts
      .getPreEmitDiagnostics(program)
      .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("the client's copies of the server's types", () => {
  it('are the same as QueryInfo, Status and ResultManifest', () => {
    const errors = errorsOf(`
      import type {
        QueryInfo as ServerInfo,
        ResultManifest as ServerManifest,
        Status as ServerStatus,
      } from '@app/contracts';
      import type { QueryInfo, ResultManifest, Status } from '@app/client';
      ${SAME}
      export const info: Same<ServerInfo, QueryInfo> = true;
      export const status: Same<ServerStatus, Status> = true;
      export const manifest: Same<ServerManifest, ResultManifest> = true;
    `);
    expect(errors).toEqual([]);
  }, 60_000);

  it('fail the check when a field is missing or of another type', () => {
    const errors = errorsOf(`
      import type { QueryInfo as ServerInfo } from '@app/contracts';
      import type { QueryInfo } from '@app/client';
      ${SAME}
      export const missing: Same<ServerInfo, Omit<QueryInfo, 'trace_id'>> = true;
      export const other: Same<ServerInfo, QueryInfo & { rows: string }> = true;
    `);
    expect(errors).toHaveLength(2);
  }, 60_000);
});
