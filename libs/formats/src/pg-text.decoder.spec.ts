import { Client, type CustomTypesConfig } from 'pg';
import { connectTestDatabase } from '@test/settings';
import {
  DATE_INFINITY,
  DATE_MINUS_INFINITY,
  TIMESTAMP_INFINITY,
  TIMESTAMP_MINUS_INFINITY,
  decodeBigint,
  decodeBool,
  decodeBytea,
  decodeDate,
  decodeFloat,
  decodeInt,
  decodeInt64,
  decodeTime,
  decodeTimestamp,
  decodeTimestampMicros,
  decodeUuid,
  flattenArray,
  parseArray,
  pgColumnKind,
  writeBytea,
  writeUtf8,
} from './pg-text.decoder';

// Values arrive as PostgreSQL's text output, as in the worker.
const RAW_TEXT = { getTypeParser: () => (value: string) => value } as unknown as CustomTypesConfig;

const q = (s: string): string => `'${s.replace(/'/g, "''")}'`;

let client: Client;

beforeAll(async () => {
  client = await connectTestDatabase({ types: RAW_TEXT });
  await client.query("SET TimeZone = 'UTC'; SET DateStyle = 'ISO'; SET IntervalStyle = 'postgres'");
});

afterAll(async () => {
  await client?.end();
});

/** Rows of text for `select <exprs> from (values …) t(v)`, with session settings for the query. */
async function rows(
  sql: string,
  settings: Record<string, string> = {},
): Promise<(string | null)[][]> {
  await client.query('BEGIN');
  try {
    for (const [k, v] of Object.entries(settings)) {
      await client.query(`SELECT set_config($1, $2, true)`, [k, v]);
    }
    const result = await client.query<(string | null)[]>({ text: sql, rowMode: 'array' });
    return result.rows;
  } finally {
    await client.query('COMMIT');
  }
}

const values = (type: string, list: string[]) =>
  `(values ${list.map((v) => `(${v}::${type})`).join(',')}) t(v)`;

describe('pg-text decoders', () => {
  it('decodes integers at their limits', async () => {
    const got = await rows(
      `select v from ${values('bigint', ['-9223372036854775808', '9223372036854775807', '9007199254740993', '-1', '0', '123456789012345'].map(q))}`,
    );
    for (const [text] of got) {
      expect(decodeBigint(text as string)).toBe(BigInt(text as string));
      expect(BigInt(decodeInt64(text as string))).toBe(BigInt(text as string));
    }
    expect(decodeInt64('123456789012345')).toBe(123456789012345);
    expect(decodeInt64('-9223372036854775808')).toBe(-9223372036854775808n);
    const ints = await rows(
      `select v from ${values('integer', ['-2147483648', '2147483647', '0'].map(q))}`,
    );
    expect(ints.map(([t]) => decodeInt(t as string))).toEqual([-2147483648, 2147483647, 0]);
  });

  it('decodes floats exactly, with NaN and infinities', async () => {
    const got = await rows(
      `select v, encode(float8send(v), 'hex') from ${values('float8', [
        q('NaN'),
        q('Infinity'),
        q('-Infinity'),
        '1e-300',
        '-0',
        '0.1',
        '1.7976931348623157e308',
        '4.9e-324',
        '123456.789',
      ])}`,
    );
    for (const [text, bits] of got) {
      const buf = Buffer.alloc(8);
      buf.writeDoubleBE(decodeFloat(text as string));
      // PostgreSQL's NaN is the canonical quiet NaN, as is JavaScript's
      expect(buf.toString('hex')).toBe(bits);
    }
  });

  it('decodes booleans', async () => {
    const got = await rows(`select v from ${values('bool', ['true', 'false'])}`);
    expect(got.map(([t]) => decodeBool(t as string))).toEqual([true, false]);
  });

  it('decodes dates to days since 1970 (BC, leap days, far years)', async () => {
    const list = [
      '2024-02-29',
      '1970-01-01',
      '1969-12-31',
      '1900-02-28',
      '2000-02-29',
      '0001-01-01',
      '0001-12-31 BC',
      '0044-03-15 BC',
      '4713-11-24 BC',
      '5874897-12-31',
      '10000-01-01',
    ].map(q);
    const got = await rows(`select v, (v - date '1970-01-01')::text from ${values('date', list)}`);
    for (const [text, days] of got)
      expect([text, decodeDate(text as string)]).toEqual([text, Number(days)]);
    const inf = await rows(`select v from ${values('date', [q('infinity'), q('-infinity')])}`);
    expect(inf.map(([t]) => decodeDate(t as string))).toEqual([DATE_INFINITY, DATE_MINUS_INFINITY]);
  });

  const TIMESTAMPS = [
    '2024-01-02 03:04:05',
    '2024-01-02 03:04:05.123456',
    '2024-02-29 23:59:59.5',
    '2024-07-01 12:00:00.000001',
    '1970-01-01 00:00:00',
    '1969-12-31 23:59:59.999999',
    '1900-01-01 00:00:00',
    '1582-10-15 00:00:00.25',
    '0044-03-15 12:00:00 BC',
    '4713-11-24 00:00:00 BC',
    '10000-01-01 00:00:00',
    '294276-12-31 23:59:59.999999',
  ];

  /** µs since the epoch as PostgreSQL computes it (exact: no float on the way). */
  const epochMicros = (ts: string) =>
    `((${ts}::date - date '1970-01-01')::numeric * 86400000000 + extract(epoch from ${ts}::time) * 1000000)::numeric(30,0)::text`;

  it('decodes timestamps as they read (microseconds since 1970)', async () => {
    const got = await rows(
      `select v, ${epochMicros('v')} from ${values('timestamp', TIMESTAMPS.map(q))}`,
    );
    for (const [text, micros] of got) {
      expect([text, decodeTimestamp(text as string)]).toEqual([text, BigInt(micros as string)]);
      expect(BigInt(decodeTimestampMicros(text as string))).toBe(BigInt(micros as string));
    }
  });

  it.each([
    ['UTC'],
    ['Asia/Kolkata'], // +05:30
    ['America/St_Johns'], // -03:30 / -02:30
    ['Europe/Amsterdam'], // +00:19:32 before 1937, LMT offsets with seconds before 1835
    ['Pacific/Kiritimati'], // +14
  ])('decodes timestamptz printed in %s to UTC microseconds', async (zone) => {
    const list = [
      ...TIMESTAMPS.map((t) => q(`${t.replace(/ BC$/, '')}+00${t.endsWith(' BC') ? ' BC' : ''}`)),
      q('1800-06-01 12:00:00+00'),
      q('1930-06-01 12:00:00.75+00'),
    ];
    const got = await rows(
      `select v, ${epochMicros("(v at time zone 'UTC')")} from ${values('timestamptz', list)}`,
      { TimeZone: zone },
    );
    for (const [text, micros] of got) {
      expect([text, decodeTimestamp(text as string)]).toEqual([text, BigInt(micros as string)]);
    }
  });

  it('maps infinite timestamps to ±(2^63 − 1)', async () => {
    const got = await rows(
      `select v from ${values('timestamptz', [q('infinity'), q('-infinity')])}`,
    );
    expect(got.map(([t]) => decodeTimestamp(t as string))).toEqual([
      TIMESTAMP_INFINITY,
      TIMESTAMP_MINUS_INFINITY,
    ]);
  });

  it.each([['German'], ['SQL, DMY'], ['SQL, MDY'], ['Postgres, MDY'], ['Postgres, DMY']])(
    'refuses (22007) dates and timestamps a statement printed in DateStyle %s, never looping or misreading',
    async (style) => {
      const got = await rows(
        `select date '2024-01-02', timestamp '2024-03-04 05:06:07.5', timestamptz '2024-03-04 05:06:07+00', date '0044-03-15 BC'`,
        { DateStyle: style },
      );
      const [date, ts, tstz, bc] = got[0] as string[];
      const refusal = expect.objectContaining({ code: 'DATA_ERROR', sqlState: '22007' });
      for (const text of [date, bc]) expect(() => decodeDate(text)).toThrow(refusal);
      for (const text of [ts, tstz]) expect(() => decodeTimestampMicros(text)).toThrow(refusal);
    },
  );

  it.each([['2026-x1-28'], ['2026-1x-28'], ['2026-11-x8'], ['2026-11-2x'], ['2026-11-2']])(
    'refuses (22007) %j as a date and a timestamp: its month and day are not two digits each',
    (text) => {
      const refusal = expect.objectContaining({ code: 'DATA_ERROR', sqlState: '22007' });
      expect(() => decodeDate(text)).toThrow(refusal);
      expect(() => decodeTimestampMicros(text)).toThrow(refusal);
    },
  );

  it('decodes times to microseconds since midnight', async () => {
    const got = await rows(
      `select v, (extract(epoch from v) * 1000000)::numeric(30,0)::text from ${values('time', ['13:14:15.5', '00:00:00', '23:59:59.999999', '24:00:00', '01:02:03.000004'].map(q))}`,
    );
    for (const [text, micros] of got) expect(decodeTime(text as string)).toBe(Number(micros));
  });

  it('decodes uuids to their 16 bytes', async () => {
    const got = await rows(
      `select v, encode(decode(replace(v::text, '-', ''), 'hex'), 'hex') from ${values('uuid', [q('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'), q('00000000-0000-0000-0000-000000000000'), q('FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF')])}`,
    );
    for (const [text, hex] of got) {
      expect(Buffer.from(decodeUuid(text as string)).toString('hex')).toBe(hex);
    }
    const out = new Uint8Array(20);
    decodeUuid('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', out, 2);
    expect(Buffer.from(out.subarray(2, 18)).toString('hex')).toBe(
      'a0eebc999c0b4ef8bb6d6bb9bd380a11',
    );
  });

  it.each([['hex'], ['escape']])('decodes bytea in %s output', async (format) => {
    const got = await rows(
      `select v, encode(v, 'hex') from ${values('bytea', [q('\\xdeadbeef'), q('\\x'), q('\\x005c27ff0a'), "convert_to('héllo\\', 'UTF8')"])}`,
      { bytea_output: format },
    );
    for (const [text, hex] of got) {
      expect(decodeBytea(text as string).toString('hex')).toBe(hex);
      const out = Buffer.alloc((text as string).length + 2);
      const n = writeBytea(out, text as string, 2);
      expect(out.subarray(2, 2 + n).toString('hex')).toBe(hex);
    }
  });

  it('writes text as UTF-8 in place', () => {
    const out = Buffer.alloc(40);
    const n = writeUtf8(out, 'héllo 東京 🚀', 1);
    expect(out.subarray(1, 1 + n).toString('utf8')).toBe('héllo 東京 🚀');
  });

  it('parses arrays like PostgreSQL prints them', async () => {
    const got = await rows(
      `select v, array_to_json(v)::text from ${values('text[]', [
        q('{1,2,NULL}'),
        q('{"a,b","c\\"d","NULL",NULL,"",x y,"back\\\\slash","{}"}'),
        q('{{1,2},{3,4}}'),
        q('{}'),
        q('[0:1]={7,8}'),
        q('{"  lead",é,東京}'),
      ])}`,
    );
    for (const [text, json] of got) {
      expect([text, parseArray(text as string)]).toEqual([text, JSON.parse(json as string)]);
    }
    expect(flattenArray(parseArray('{{1,2},{3,NULL}}'))).toEqual(['1', '2', '3', null]);
    expect(parseArray('{(1,2),(3,4);(5,6),(7,8)}', ';')).toEqual(['(1,2),(3,4)', '(5,6),(7,8)']);
  });

  it('parses box arrays, whose delimiter is ";"', async () => {
    const got = await rows(
      `select v, array_to_json(v::text[])::text from ${values('box[]', [
        q('{(1,2),(3,4);NULL;(-1.5,1e+20),(Infinity,-Infinity)}'),
        q('{{(1,1),(0,0);(2,2),(1,1)};{NULL;(3,3),(2,2)}}'),
        q('[0:0]={(5,6),(7,8)}'),
        q('{}'),
      ])}`,
    );
    for (const [text, json] of got) {
      expect([text, parseArray(text as string, ';')]).toEqual([text, JSON.parse(json as string)]);
    }
  });

  it('maps column types to value kinds', () => {
    expect(pgColumnKind(1184, 'timestamp with time zone')).toEqual({
      kind: 'timestamptz',
      list: false,
    });
    expect(pgColumnKind(1700, 'numeric')).toEqual({ kind: 'text', list: false });
    expect(pgColumnKind(1007, 'integer[]')).toEqual({ kind: 'int32', list: true });
    expect(pgColumnKind(1231, 'numeric[]')).toEqual({ kind: 'text', list: true });
    expect(pgColumnKind(99999, 'mood[]')).toEqual({ kind: 'text', list: true });
    expect(pgColumnKind(3802, 'jsonb')).toEqual({ kind: 'json', list: false });
  });
});
