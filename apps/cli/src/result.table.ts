import Table, { type HorizontalAlignment } from 'cli-table3';
import type { Column, JsonValue, Row } from '@sluice/client';

/** PostgreSQL's names (format_type) of the types whose values are numbers. */
const NUMERIC_TYPE = /^(smallint|integer|bigint|numeric|decimal|real|double precision|oid|money)\b/;

/**
 * Whether a column holds numbers, to right-align it: by its type, or, for lists with no types
 * (`sluice queries`), by every value being a JSON number.
 */
function isNumeric(column: Column, index: number, rows: Row[]): boolean {
  if (column.type !== '') return NUMERIC_TYPE.test(column.type);
  const values = rows.map((row) => row[index]).filter((v) => v !== null && v !== undefined);
  return values.length > 0 && values.every((v) => typeof v === 'number');
}

function cellText(value: JsonValue | undefined): string {
  if (value === null || value === undefined) return '';
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/**
 * An aligned table as a terminal shows it: one rule under the header and none between rows (a
 * rule per row doubled the height), numbers right-aligned, NULL as an empty cell. The row count
 * is not part of it: the caller says it on stderr, so that stdout holds the table alone.
 */
export function resultTable(schema: Column[], rows: Row[]): string {
  const align = schema.map((column, i): HorizontalAlignment =>
    isNumeric(column, i, rows) ? 'right' : 'left',
  );
  const head = schema.map((c, i) => ({ content: c.name, hAlign: align[i] }));
  const table = new Table({
    // cli-table3 takes cells in head as in rows; its types say strings only (the spec below
    // fails if a version stops aligning them).
    head: head as unknown as string[],
    style: { head: [], border: [], compact: true },
  });
  for (const row of rows) {
    table.push(schema.map((_, i) => ({ content: cellText(row[i]), hAlign: align[i] })));
  }
  return `${table.toString()}\n`;
}

/** One CSV field (RFC 4180): quoted when it holds a comma, a quote or a line break. */
function csvField(value: JsonValue | undefined): string {
  const text = cellText(value);
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** Rows as CSV with a header line and CRLF line ends, as the service writes text/csv. */
export function resultCsv(names: string[], rows: (JsonValue | undefined)[][]): string {
  return [names, ...rows].map((row) => `${row.map(csvField).join(',')}\r\n`).join('');
}
