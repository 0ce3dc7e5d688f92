import { Data, Table, Vector, tableFromIPC } from 'apache-arrow';
import { ArrowEncoder } from './arrow.encoder';
import {
  FIXTURE_CASES,
  FIXTURE_COLUMNS,
  OBJECT_JSON_CASES,
  OBJECT_JSON_COLUMNS,
} from './pg-text.fixture';
import { EncoderColumn, TextRow } from './result.encoder';
import { RowBatch } from './row.batch';

const OK = { reason: 'OK', sql_state: '00000', vendor_code: 0 };

function encode(columns: EncoderColumn[], chunks: TextRow[][]): { body: Buffer; parts: Buffer[] } {
  const encoder = new ArrowEncoder({ queryId: 'q-1', layout: 'array', columns });
  const parts = [encoder.head(), ...chunks.map((c) => encoder.rows(RowBatch.fromText(c)))];
  parts.push(encoder.end(OK) as Buffer);
  return { body: Buffer.concat(parts), parts };
}

// Dates and times as stored (days, µs), not as the reader's millisecond numbers.
const RAW = new Set(['date', 'time without time zone', 'timestamp without time zone']);
RAW.add('timestamp with time zone');

/** Column `name` as the fixture writes values: raw stored numbers for dates and times. */
function values(table: Table, name: string, raw: boolean): unknown[] {
  const vector = table.getChild(name) as Vector;
  const out: unknown[] = [];
  for (const data of vector.data as Data[]) {
    const chunk = new Vector([data]);
    for (let i = 0; i < data.length; i++) {
      if (!data.getValid(i)) out.push(null);
      else out.push(raw ? (data.values as ArrayLike<unknown>)[data.offset + i] : chunk.get(i));
    }
  }
  return out.map(normalise);
}

function normalise(v: unknown): unknown {
  if (v instanceof Uint8Array) return Buffer.from(v).toString('hex');
  if (v instanceof Vector) return [...(v as Iterable<unknown>)].map(normalise);
  return v;
}

describe(ArrowEncoder.name, () => {
  it('writes every common type so that apache-arrow reads each value back', () => {
    const rows = FIXTURE_CASES.map(([text]) => text);
    const { body, parts } = encode(FIXTURE_COLUMNS, [
      rows.slice(0, 1),
      [],
      rows.slice(1, 3),
      rows.slice(3),
    ]);
    expect(parts[2]).toHaveLength(0); // an empty chunk is no record batch
    const table = tableFromIPC(body);
    expect(table.numRows).toBe(FIXTURE_CASES.length);
    expect(table.batches).toHaveLength(3);
    FIXTURE_COLUMNS.forEach((c, i) => {
      const got = values(table, c.name, RAW.has(c.type));
      FIXTURE_CASES.forEach(([, want], r) => {
        expect([r, c.name, got[r]]).toEqual([r, c.name, want[i]]);
      });
    });
  });

  it('maps each column to its Arrow type, all nullable', () => {
    const table = tableFromIPC(encode(FIXTURE_COLUMNS, []).body);
    const types = Object.fromEntries(
      table.schema.fields.map((f) => [f.name, `${String(f.type)}${f.nullable ? '' : ' not null'}`]),
    );
    expect(types).toEqual({
      i2: 'Int16',
      i4: 'Int32',
      i8: 'Int64',
      num: 'Utf8',
      f4: 'Float32',
      f8: 'Float64',
      txt: 'Utf8',
      vc: 'Utf8',
      b: 'Bool',
      d: 'Date32<DAY>',
      tm: 'Time64<MICROSECOND>',
      ts: 'Timestamp<MICROSECOND>',
      tstz: 'Timestamp<MICROSECOND, UTC>',
      u: 'FixedSizeBinary[16]',
      j: 'Utf8',
      jb: 'Utf8',
      by: 'Binary',
      ia: 'List<Int32>',
      ta: 'List<Utf8>',
      iv: 'Utf8',
    });
    const u = table.schema.fields.find((f) => f.name === 'u');
    expect(u?.metadata.get('ARROW:extension:name')).toBe('arrow.uuid');
    const jb = table.schema.fields.find((f) => f.name === 'jb');
    expect(jb?.metadata.get('ARROW:extension:name')).toBe('arrow.json');
  });

  it('carries composites, hstore and arrays of them as JSON: their to_json() text', () => {
    const table = tableFromIPC(
      encode(OBJECT_JSON_COLUMNS, [OBJECT_JSON_CASES.map(([text]) => text)]).body,
    );
    OBJECT_JSON_COLUMNS.forEach((c, i) => {
      expect(values(table, c.name, false)).toEqual(OBJECT_JSON_CASES.map(([, want]) => want[i]));
    });
    const fields = new Map(table.schema.fields.map((f) => [f.name, f]));
    expect(String(fields.get('p')?.type)).toBe('Utf8');
    expect(fields.get('p')?.metadata.get('ARROW:extension:name')).toBe('arrow.json');
    expect(fields.get('h')?.metadata.get('ARROW:extension:name')).toBe('arrow.json');
    expect(String(fields.get('ps')?.type)).toBe('List<Utf8>');
  });

  it('frames the stream: schema first, one message per chunk, end-of-stream marker last', () => {
    const columns = [FIXTURE_COLUMNS[1]];
    const { parts } = encode(columns, [[['1'], ['2']], [['3']]]);
    expect(parts[0].readInt32LE(0)).toBe(-1); // continuation token of the schema message
    expect(tableFromIPC(Buffer.concat([parts[0], parts[3]])).numRows).toBe(0);
    expect(tableFromIPC(Buffer.concat(parts)).getChild('i4')?.toArray()).toEqual(
      Int32Array.of(1, 2, 3),
    );
    expect(parts[3]).toEqual(Buffer.from([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]));
  });

  it('writes a valid stream for a statement without columns', () => {
    const table = tableFromIPC(encode([], [[], [[], []]]).body);
    expect(table.numCols).toBe(0);
    expect(table.numRows).toBe(2);
  });

  it('refuses a timestamp no int64 holds with 22008 rather than a wrapped-round value', () => {
    const columns: EncoderColumn[] = [
      { name: 'ts', type: 'timestamp without time zone', oid: 1114, json: (v) => v },
    ];
    const last = values(
      tableFromIPC(encode(columns, [[['294247-01-10 04:00:54.775806']]]).body),
      'ts',
      true,
    );
    expect(last).toEqual([2n ** 63n - 2n]);
    const encoder = new ArrowEncoder({ queryId: 'q', layout: 'array', columns });
    encoder.head();
    expect(() => encoder.rows(RowBatch.fromText([['294276-12-31 23:59:59']]))).toThrow(
      expect.objectContaining({ code: 'DATA_ERROR', sqlState: '22008' }),
    );
  });

  it('returns null at the end of a failed result (the response is aborted)', () => {
    const encoder = new ArrowEncoder({ queryId: 'q', layout: 'array', columns: FIXTURE_COLUMNS });
    encoder.head();
    encoder.rows(RowBatch.fromText([FIXTURE_CASES[0][0]]));
    expect(encoder.end({ reason: 'boom', sql_state: 'XX000', vendor_code: -103 })).toBeNull();
  });
});
