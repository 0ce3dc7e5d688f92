import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';

/** A JSON-safe row as DuckDB renders it (bigints and decimals as strings). */
export type DuckRow = Record<string, unknown>;

/**
 * Runs `sql` in an in-memory DuckDB over a Parquet file: `FILE` in the statement stands for the
 * file's path (`select * from read_parquet(FILE)`, `parquet_metadata(FILE)`). DuckDB is the reader
 * users compare Sluice's files with; it reads them as its own `COPY … TO` output, with no help.
 */
export async function duckdb(file: Buffer, sql: string): Promise<DuckRow[]> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-duckdb-'));
  const path = join(dir, 'result.parquet');
  writeFileSync(path, file);
  const instance = await DuckDBInstance.create(':memory:', { threads: '1' });
  try {
    const connection = await instance.connect();
    try {
      const reader = await connection.runAndReadAll(sql.replaceAll('FILE', `'${path}'`));
      return reader.getRowObjectsJson();
    } finally {
      connection.closeSync();
    }
  } finally {
    instance.closeSync();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** parquet_metadata(): one row per column chunk. */
export function duckdbMetadata(file: Buffer): Promise<DuckRow[]> {
  return duckdb(file, 'select * from parquet_metadata(FILE) order by row_group_id, column_id');
}
