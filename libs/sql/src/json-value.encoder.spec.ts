import { Client, type CustomTypesConfig } from 'pg';
import { connectTestDatabase } from '@test/settings';
import { jsonValueEncoder } from './json-value.encoder';
import { jsonValueRoom, writeJsonValue } from './json-value.writer';
import { TYPE_INFO_SQL, TypeCatalog, rowToTypeInfo } from './type.catalog';
import type { PgTypeInfo } from './type.info';

// Every value arrives as PostgreSQL's text output, as in the worker.
const RAW_TEXT = {
  getTypeParser: () => (value: string) => value,
} as unknown as CustomTypesConfig;

// Unique per run so parallel runs against one database cannot collide.
const SUFFIX = `${process.pid}_${Date.now()}`;
const DOMAIN_INT = `pg_temp.sluice_dint_${SUFFIX}`;
const DOMAIN_NUMERIC = `pg_temp.sluice_dnum_${SUFFIX}`;
const DOMAIN_DOMAIN = `pg_temp.sluice_ddom_${SUFFIX}`;
const DOMAIN_ARRAY = `pg_temp.sluice_darr_${SUFFIX}`;
const DOMAIN_BOX = `pg_temp.sluice_dbox_${SUFFIX}`;
const DOMAIN_TSTZ = `pg_temp.sluice_dtstz_${SUFFIX}`;
const ENUM = `pg_temp.sluice_enum_${SUFFIX}`;
const INNER = `pg_temp.sluice_inner_${SUFFIX}`;
const OUTER = `pg_temp.sluice_outer_${SUFFIX}`;
const EMPTY = `pg_temp.sluice_empty_${SUFFIX}`;
const ONE = `pg_temp.sluice_one_${SUFFIX}`;
const ROWS = `pg_temp.sluice_rows_${SUFFIX}`;

interface Case {
  /** SQL type the literals are cast to. */
  type: string;
  /** SQL expressions, each cast to `type`. */
  values: string[];
  /** Session settings for this case only (TimeZone, extra_float_digits …). */
  settings?: Record<string, string>;
}

const q = (s: string): string => `'${s.replace(/'/g, "''")}'`;
const e = (s: string): string => `E'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;

const TIMESTAMPTZ_VALUES = [
  q('2024-01-02 03:04:05+00'),
  q('2024-01-02 03:04:05.123456+00'),
  q('2024-07-01 12:00:00.5+02'),
  q('1900-01-01 00:00:00+00'),
  q('1937-06-30 23:00:00+00'),
  q('1800-06-01 12:00:00+00'),
  q('0044-03-15 12:00:00+00 BC'),
  q('4713-01-01 00:00:00+00 BC'),
  q('10000-01-01 00:00:00+00'),
  q('294276-12-31 23:59:59.999999+00'),
  q('infinity'),
  q('-infinity'),
  'NULL',
];

const CASES: Record<string, Case> = {
  smallint: { type: 'smallint', values: ['-32768', '32767', '0', 'NULL'] },
  integer: { type: 'integer', values: ['-2147483648', '2147483647', '0', '-1'] },
  bigint: {
    type: 'bigint',
    values: ['-9223372036854775808', '9223372036854775807', '9007199254740993'],
  },
  numeric: {
    type: 'numeric',
    values: [
      q('1234567890123456789012345678901234567890'),
      q('-1234567890123456789012345678901234567890.0000000001'),
      q('0.0000000000000000000000000000000000000001'),
      q('1e-20'),
      q('1.50'),
      q('-0'),
      q('0'),
      q('NaN'),
      q('Infinity'),
      q('-Infinity'),
    ],
  },
  'numeric(10,4)': { type: 'numeric(10,4)', values: [q('3.14159'), q('-12.5'), q('0')] },
  real: {
    type: 'real',
    values: [
      q('0.1'),
      q('-0'),
      q('1e-38'),
      q('1e-45'),
      q('3.4028235e38'),
      q('123456789'),
      q('NaN'),
      q('Infinity'),
      q('-Infinity'),
    ],
  },
  'double precision': {
    type: 'double precision',
    values: [
      q('0.1'),
      q('-0'),
      q('1e-300'),
      q('5e-324'),
      q('1.7976931348623157e308'),
      q('1e15'),
      q('1e16'),
      q('123456789012345680000'),
      q('-2.5'),
      q('NaN'),
      q('Infinity'),
      q('-Infinity'),
    ],
  },
  'double precision, extra_float_digits=0': {
    type: 'double precision',
    values: [q('0.1'), q('1e-300'), q('1e16'), q('NaN'), q('-Infinity'), q('3.14159265358979')],
    settings: { extra_float_digits: '0' },
  },
  'double precision, extra_float_digits=3': {
    type: 'double precision',
    values: [q('0.1'), q('1e-300'), q('1e16'), q('NaN')],
    settings: { extra_float_digits: '3' },
  },
  text: {
    type: 'text',
    values: [
      q('plain'),
      q(''),
      q('NULL'),
      e('quote " and backslash \\ and slash /'),
      e('controls \u0001\u0008\u000b\u000c\n\r\t\u001f\u007f end'),
      q('unicode é ü ß 中文 Ω'),
      q('emoji 😀 👍🏽 👨‍👩‍👧'),
      e('line separators \u2028 \u2029 and bom \ufeff'),
      q("single ' quote"),
      q('{"looks":"like json"}'),
      'NULL',
    ],
  },
  'character varying(10)': { type: 'varchar(10)', values: [q('abc'), e('a"b\\c')] },
  'character(5)': { type: 'char(5)', values: [q('ab'), q('')] },
  name: { type: 'name', values: [q('pg_class'), q('with space')] },
  '"char"': { type: '"char"', values: [q('a'), q('"')] },
  boolean: { type: 'boolean', values: ['true', 'false', 'NULL'] },
  date: {
    type: 'date',
    values: [
      q('2024-02-29'),
      q('0001-01-01'),
      q('0044-03-15 BC'),
      q('4713-01-01 BC'),
      q('10000-01-01'),
      q('5874897-12-31'),
      q('infinity'),
      q('-infinity'),
    ],
  },
  time: {
    type: 'time',
    values: [q('00:00'), q('12:34:56.789'), q('23:59:59.999999'), q('24:00')],
  },
  'time(2)': { type: 'time(2)', values: [q('12:34:56.789')] },
  'time with time zone': {
    type: 'timetz',
    values: [q('12:34:56+05:30'), q('12:00-08'), q('01:02:03.5+00'), q('00:00+00:19:32')],
  },
  timestamp: {
    type: 'timestamp',
    values: [
      q('2024-01-02 03:04:05'),
      q('2024-01-02 03:04:05.123456'),
      q('2000-01-01 00:00:00.1'),
      q('0044-03-15 12:00:00 BC'),
      q('4713-01-01 00:00:00 BC'),
      q('10000-01-01 00:00:00.000001'),
      q('294276-12-31 23:59:59.999999'),
      q('infinity'),
      q('-infinity'),
    ],
  },
  'timestamp(0)': { type: 'timestamp(0)', values: [q('2024-01-02 03:04:05.6')] },
  'timestamptz, UTC': { type: 'timestamptz', values: TIMESTAMPTZ_VALUES },
  'timestamptz, Asia/Kolkata': {
    type: 'timestamptz',
    values: TIMESTAMPTZ_VALUES,
    settings: { TimeZone: 'Asia/Kolkata' },
  },
  'timestamptz, Europe/Amsterdam (LMT with seconds)': {
    type: 'timestamptz',
    values: TIMESTAMPTZ_VALUES,
    settings: { TimeZone: 'Europe/Amsterdam' },
  },
  'timestamptz, America/St_Johns': {
    type: 'timestamptz',
    values: TIMESTAMPTZ_VALUES,
    settings: { TimeZone: 'America/St_Johns' },
  },
  'timestamptz, America/Los_Angeles': {
    type: 'timestamptz',
    values: TIMESTAMPTZ_VALUES,
    settings: { TimeZone: 'America/Los_Angeles' },
  },
  'timestamptz, POSIX <+0330>-3:30': {
    type: 'timestamptz',
    values: TIMESTAMPTZ_VALUES,
    settings: { TimeZone: '<+0330>-3:30' },
  },
  'timestamptz, POSIX UTC+5': {
    type: 'timestamptz',
    values: TIMESTAMPTZ_VALUES,
    settings: { TimeZone: 'UTC+5' },
  },
  interval: {
    type: 'interval',
    values: [
      q('1 year 2 mons 3 days 04:05:06.789'),
      q('-1 day'),
      q('0'),
      q('-1 year -2 mons +3 days -04:05:06'),
      q('100000 hours'),
    ],
  },
  uuid: {
    type: 'uuid',
    values: [q('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'), q('0'.repeat(32))],
  },
  json: {
    type: 'json',
    values: [
      q('{"a" :  1,  "b": [1, 2 ,3]}'),
      q('  [ ]  '),
      q('"str\\"ing"'),
      q('null'),
      q('1.50'),
      q('{"a":1,"a":2}'),
      e('{\n  "multi": "line"\n}'),
      q('"\\u00e9 \\ud83d\\ude00"'),
    ],
  },
  jsonb: {
    type: 'jsonb',
    values: [
      q('{"b" :  [1, 2], "a": "x\\"y", "c": null}'),
      q('[]'),
      q('1.50'),
      q('1e3'),
      q('"\\u00e9 \\ud83d\\ude00 \\u0001"'),
      q('{"a":1,"a":2}'),
      q('true'),
    ],
  },
  bytea: {
    type: 'bytea',
    values: [q('\\x'), q('\\x00ff'), q('\\x5c22'), "convert_to('héllo', 'UTF8')"],
  },
  money: { type: 'money', values: [q('1234.56'), q('-0.01')] },
  inet: { type: 'inet', values: [q('192.168.0.1/24'), q('::1')] },
  cidr: { type: 'cidr', values: [q('10.0.0.0/8')] },
  macaddr: { type: 'macaddr', values: [q('08:00:2b:01:02:03')] },
  point: { type: 'point', values: [q('(1,2.5)')] },
  box: { type: 'box', values: [q('(1,1),(0,0)')] },
  int4range: { type: 'int4range', values: [q('[1,10)'), q('empty')] },
  tstzrange: { type: 'tstzrange', values: [q('[2024-01-01 00:00+00,infinity)')] },
  int4multirange: { type: 'int4multirange', values: [q('{[1,3),[5,7)}')] },
  tsvector: { type: 'tsvector', values: [q("a fat 'cat'")] },
  xml: { type: 'xml', values: [q('<a x="1">t&amp;</a>')] },
  bit: { type: 'bit(4)', values: [q('1010')] },
  'bit varying': { type: 'varbit', values: [q('10101')] },
  oid: { type: 'oid', values: ['0', '4294967295', '23'] },
  regclass: { type: 'regclass', values: [q('pg_class')] },
  regtype: { type: 'regtype', values: [q('timestamp with time zone'), q('integer[]')] },
  pg_lsn: { type: 'pg_lsn', values: [q('16/B374D848')] },
  int2vector: { type: 'int2vector', values: [q('1 2 3'), q(''), q('-5')] },
  oidvector: { type: 'oidvector', values: [q('23 25'), q('')] },
  enum: {
    type: ENUM,
    values: [q('happy'), q('with "quote" \\ and, comma'), q('😀')],
  },
  'domain over integer': { type: DOMAIN_INT, values: ['1', '-2147483648', 'NULL'] },
  'domain over numeric': { type: DOMAIN_NUMERIC, values: [q('1.50'), q('NaN')] },
  'domain over domain': { type: DOMAIN_DOMAIN, values: ['42'] },
  'domain over timestamptz': {
    type: DOMAIN_TSTZ,
    values: [q('1900-01-01 00:00+00'), q('infinity')],
    settings: { TimeZone: 'Europe/Amsterdam' },
  },
  'domain over integer[]': { type: DOMAIN_ARRAY, values: [q('{1,2,NULL}'), q('{}')] },
  'integer[]': {
    type: 'integer[]',
    values: [
      q('{1,2,3}'),
      q('{}'),
      q('{NULL}'),
      q('{1,NULL,3}'),
      q('{{1,2},{3,4}}'),
      q('{{{1,2},{3,4}},{{5,6},{7,NULL}}}'),
      q('[0:2]={1,2,3}'),
      q('[-1:0][1:2]={{1,2},{3,4}}'),
      q('[5:5]={NULL}'),
    ],
  },
  'bigint[]': { type: 'bigint[]', values: [q('{-9223372036854775808,9223372036854775807}')] },
  'numeric[]': { type: 'numeric[]', values: [q('{1.50,NaN,Infinity,-Infinity,NULL}')] },
  'double precision[]': {
    type: 'float8[]',
    values: [q('{0.1,-0,1e-300,NaN,Infinity,-Infinity}')],
  },
  'real[]': { type: 'real[]', values: [q('{0.1,NaN}')] },
  'boolean[]': { type: 'boolean[]', values: [q('{t,f,NULL}'), q('{{t},{f}}')] },
  'text[]': {
    type: 'text[]',
    values: [
      `ARRAY['a,b', '{c}', '"q"', 'back\\slash', 'NULL', 'null', '', ' spaced ', NULL, 'plain']`,
      `ARRAY[${e('tab\there')}, ${e('nl\nhere')}, ${e('\u0001')}, '😀', 'é', ${e('"\\')}]`,
      q('{{a,"b c"},{"d,e",NULL}}'),
      q('[2:3]={x,y}'),
      q('{}'),
    ],
  },
  'character varying[]': { type: 'varchar[]', values: [q('{"a b",c}')] },
  'character(3)[]': { type: 'char(3)[]', values: [q('{a,bb}')] },
  'name[]': { type: 'name[]', values: [q('{a,"b c"}')] },
  'date[]': { type: 'date[]', values: [q('{2024-01-01,infinity,"0044-03-15 BC",NULL}')] },
  'timestamp[]': {
    type: 'timestamp[]',
    values: [q('{"2024-01-02 03:04:05.5","0044-03-15 12:00:00 BC",-infinity}')],
  },
  'timestamptz[]': {
    type: 'timestamptz[]',
    values: [
      `ARRAY['2024-01-02 03:04:05+00', '1900-01-01 00:00+00', '0044-03-15 12:00:00+00 BC', 'infinity', NULL]::timestamptz[]`,
      q('{{"2024-01-01 00:00+00"},{"2024-06-01 00:00+00"}}'),
    ],
    settings: { TimeZone: 'Europe/Amsterdam' },
  },
  'timestamptz[], Asia/Kolkata': {
    type: 'timestamptz[]',
    values: [q('{"2024-01-02 03:04:05+00",-infinity}')],
    settings: { TimeZone: 'Asia/Kolkata' },
  },
  'time[]': { type: 'time[]', values: [q('{12:00,"23:59:59.5"}')] },
  'interval[]': { type: 'interval[]', values: [q('{"1 day","-01:00:00"}')] },
  'uuid[]': { type: 'uuid[]', values: [q('{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11,NULL}')] },
  'json[]': {
    type: 'json[]',
    values: [`ARRAY['{"a" :  1}', '[1, "x,y}"]', 'null', '"s"', NULL]::json[]`, q('{}')],
  },
  'jsonb[]': {
    type: 'jsonb[]',
    values: [`ARRAY['{"b":1, "a":"q\\"}"}', '[]', 'null', NULL]::jsonb[]`],
  },
  'bytea[]': { type: 'bytea[]', values: [`ARRAY['\\x00ff'::bytea, '\\x'::bytea, NULL]`] },
  'box[] (delimiter ;)': {
    type: 'box[]',
    values: [q('{(1,1),(0,0);(2,2),(1,1)}'), q('{{(1,1),(0,0)};{(3,3),(2,2)}}'), q('{NULL}')],
  },
  'point[]': { type: 'point[]', values: [q('{"(1,2)","(3,4)"}')] },
  'int4range[]': { type: 'int4range[]', values: [q('{"[1,2)",empty}')] },
  'int2vector[]': { type: 'int2vector[]', values: [`ARRAY['1 2'::int2vector, ''::int2vector]`] },
  'oidvector[]': { type: 'oidvector[]', values: [`ARRAY['23 25'::oidvector]`] },
  'oid[]': { type: 'oid[]', values: [q('{1,4294967295}')] },
  'money[]': { type: 'money[]', values: [q('{1.5,-2}')] },
  'enum[]': { type: `${ENUM}[]`, values: [q('{happy,"with \\"quote\\" \\\\ and, comma"}')] },
  'domain over integer, array of': { type: `${DOMAIN_INT}[]`, values: [q('{1,NULL,3}')] },
  'domain over box, array of': {
    type: `${DOMAIN_BOX}[]`,
    values: [q('{(1,1),(0,0);(2,2),(1,1)}')],
  },
  'domain over integer[], array of': {
    type: `${DOMAIN_ARRAY}[]`,
    values: [`ARRAY['{1,2}'::${DOMAIN_ARRAY}, '{3}', '{}', NULL]`],
  },
  'NULL of unknown type as text': { type: 'text', values: ['NULL'] },
  'composite: nested, arrays, NULLs, quotes, backslashes, commas, a domain': {
    type: OUTER,
    values: [
      `row(row(1, ${e('back\\slash "and" quote, (comma)')}, 1.50)::${INNER}, '{1,2}',
        ARRAY[row(2, NULL, NULL)::${INNER}, NULL], '2024-01-02 03:04:05+00', '{"k": [1]}',
        true, '\\x0102', 7, ${e('line\nnext\ttab é 😀')})`,
      `row(row(1, ${e('a\\b')}, NULL)::${INNER}, NULL, '{}', NULL, NULL, false, NULL, NULL, '')`,
      `row(NULL, '{{1,2},{3,4}}', ARRAY[row(NULL, '', '-0.5')::${INNER}, row(NULL, ' ', NULL)::${INNER}], 'infinity', 'null',
        NULL, '\\x', NULL, 'NULL')`,
    ],
  },
  'composite: numbers that are no JSON numbers, dates, timestamps': {
    type: OUTER,
    settings: { TimeZone: 'Asia/Kolkata' },
    values: [
      `row(row(1, 'x', 'NaN')::${INNER}, NULL, NULL, '1800-06-01 12:00:00+00', NULL, NULL, NULL, NULL, NULL)`,
    ],
  },
  'array of composites': {
    type: `${INNER}[]`,
    values: [
      `ARRAY[row(1, 'a,b', NULL)::${INNER}, row(2, '(x)', 3)::${INNER}, NULL]`,
      `'{}'`,
      `ARRAY[row(NULL, NULL, NULL)::${INNER}]`,
    ],
  },
  'composite without attributes': { type: EMPTY, values: ['row()'] },
  'composite of one text attribute': {
    type: ONE,
    values: ['row(NULL)', `row('')`, `row('NULL')`, `row(' ')`, `row('()')`, `row('"')`],
  },
  'table row type with a dropped column': {
    type: ROWS,
    values: [`row(1, 'kept')`, `row(NULL, NULL)`],
  },
};

/** What the JSON formats write for a value: its form's bytes, or else its encoder's text. */
function written(catalog: TypeCatalog, oid: number, text: string): string {
  const src = Buffer.from(text, 'utf8');
  const dst = Buffer.alloc(jsonValueRoom(src.length));
  const end = writeJsonValue(catalog.jsonForm(oid), src, 0, src.length, dst, 0);
  return end < 0 ? catalog.jsonEncoder(oid)(text) : dst.toString('utf8', 0, end);
}

async function setSession(client: Client, settings: Record<string, string>): Promise<void> {
  for (const [name, value] of Object.entries(settings)) {
    await client.query(`SELECT pg_catalog.set_config($1, $2, false)`, [name, value]);
  }
}

async function loadTypes(client: Client, catalog: TypeCatalog, oids: number[]): Promise<void> {
  for (let m = catalog.missing(oids); m.length > 0; m = catalog.missing(oids)) {
    const result = await client.query<Record<string, unknown>>(TYPE_INFO_SQL, [m]);
    catalog.add(result.rows.map(rowToTypeInfo), m);
  }
}

describe('jsonValueEncoder', () => {
  let client: Client;
  const catalog = new TypeCatalog();

  beforeAll(async () => {
    client = await connectTestDatabase();
    await client.query(`CREATE DOMAIN ${DOMAIN_INT} AS integer`);
    await client.query(`CREATE DOMAIN ${DOMAIN_NUMERIC} AS numeric CHECK (VALUE IS NOT NULL)`);
    await client.query(`CREATE DOMAIN ${DOMAIN_DOMAIN} AS ${DOMAIN_INT}`);
    await client.query(`CREATE DOMAIN ${DOMAIN_ARRAY} AS integer[]`);
    await client.query(`CREATE DOMAIN ${DOMAIN_BOX} AS box`);
    await client.query(`CREATE DOMAIN ${DOMAIN_TSTZ} AS timestamptz`);
    await client.query(`CREATE TYPE ${ENUM} AS ENUM ('happy', 'with "quote" \\ and, comma', '😀')`);
    await client.query(`CREATE TYPE ${INNER} AS (a int, "b c" text, d numeric)`);
    await client.query(
      `CREATE TYPE ${OUTER} AS (i ${INNER}, arr int[], ia ${INNER}[], t timestamptz, j jsonb,
        b bool, "by" bytea, dom ${DOMAIN_INT}, "tab\tname" text)`,
    );
    await client.query(`CREATE TYPE ${EMPTY} AS ()`);
    await client.query(`CREATE TYPE ${ONE} AS (v text)`);
    await client.query(`CREATE TABLE ${ROWS} (id int, gone text, name text)`);
    await client.query(`ALTER TABLE ${ROWS} DROP COLUMN gone`);
  });

  afterAll(async () => {
    // No client when beforeAll could not connect: that failure is the one reported. Temporary
    // objects otherwise: they go with the session anyway, whatever fails here.
    try {
      await client?.query(`DROP TABLE IF EXISTS ${ROWS}`);
      await client?.query(`DROP TYPE IF EXISTS ${OUTER}, ${INNER}, ${EMPTY}, ${ONE}`);
      await client?.query(
        `DROP DOMAIN IF EXISTS ${DOMAIN_DOMAIN}, ${DOMAIN_INT}, ${DOMAIN_NUMERIC}, ${DOMAIN_ARRAY}, ${DOMAIN_BOX}, ${DOMAIN_TSTZ}`,
      );
      await client?.query(`DROP TYPE IF EXISTS ${ENUM}`);
    } finally {
      await client?.end();
    }
  });

  beforeEach(async () => {
    await client.query(
      `SET TimeZone = 'UTC'; SET DateStyle = 'ISO'; SET IntervalStyle = 'postgres'; RESET extra_float_digits`,
    );
  });

  it.each(Object.entries(CASES))('matches to_json() for %s', async (_title, testCase) => {
    await setSession(client, testCase.settings ?? {});
    const rows = testCase.values.map((value) => `((${value})::${testCase.type})`).join(', ');
    const result = await client.query<[string | null, string | null]>({
      text: `SELECT v, to_json(v)::text FROM (VALUES ${rows}) t(v)`,
      rowMode: 'array',
      types: RAW_TEXT,
    });
    // The wire reports a domain column as its base type; encode by the declared type as well.
    const wireOid = result.fields[0].dataTypeID;
    const declared = await client.query<[string]>({
      text: `SELECT $1::pg_catalog.regtype::pg_catalog.oid`,
      values: [testCase.type],
      rowMode: 'array',
    });
    const declaredOid = Number(declared.rows[0][0]);
    await loadTypes(client, catalog, [wireOid, declaredOid]);

    const expected = result.rows.map(([text, json]) => [text, json]);
    for (const oid of new Set([wireOid, declaredOid])) {
      const encode = catalog.jsonEncoder(oid);
      const actual = result.rows.map(([text]) => [text, text === null ? null : encode(text)]);
      expect(actual).toEqual(expected);
      const copied = result.rows.map(([text]) => [
        text,
        text === null ? null : written(catalog, oid, text),
      ]);
      expect(copied).toEqual(expected);
    }
    expect(result.rows).toHaveLength(testCase.values.length);
  });

  it('names column types as format_type() prints them', async () => {
    const result = await client.query({
      text: `SELECT 1::int4 a, 2::int8 b, now() c, '{}'::int[] d, 'x'::varchar(3) e,
        '1'::numeric(5,2) f, '{}'::timestamptz[] g, 't'::bool h, 1::${DOMAIN_INT} i,
        '{}'::${DOMAIN_INT}[] j`,
      rowMode: 'array',
      types: RAW_TEXT,
    });
    const oids = result.fields.map((field) => field.dataTypeID);
    await loadTypes(client, catalog, oids);
    expect(oids.map((oid) => catalog.name(oid))).toEqual([
      'integer',
      'bigint',
      'timestamp with time zone',
      'integer[]',
      'character varying',
      'numeric',
      'timestamp with time zone[]',
      'boolean',
      // RowDescription carries a domain's base type, so a domain column is named after it.
      'integer',
      `${DOMAIN_INT.replace('pg_temp.', '')}[]`,
    ]);
  });

  it('loads element and base types of arrays and domains', async () => {
    const own = new TypeCatalog();
    const result = await client.query({
      text: `SELECT ARRAY[1::${DOMAIN_INT}] a`,
      rowMode: 'array',
      types: RAW_TEXT,
    });
    const oid = result.fields[0].dataTypeID;
    const rounds: number[][] = [];
    for (let m = own.missing([oid]); m.length > 0; m = own.missing([oid])) {
      rounds.push(m);
      const rows = await client.query<Record<string, unknown>>(TYPE_INFO_SQL, [m]);
      own.add(rows.rows.map(rowToTypeInfo));
    }
    expect(rounds.map((round) => round.length)).toEqual([1, 1, 1]);
    expect(rounds[2]).toEqual([23]);
    expect(own.jsonEncoder(oid)(String(result.rows[0][0]))).toBe('[1]');
  });

  it('encodes an anonymous record as a JSON string of its text form: its names and types are not in the result', async () => {
    const result = await client.query<[string, string]>({
      text: `SELECT row(1, 'a b'), s FROM (SELECT 1 AS x, 'a' AS y) s`,
      rowMode: 'array',
      types: RAW_TEXT,
    });
    const oids = result.fields.map((f) => f.dataTypeID);
    expect(oids).toEqual([2249, 2249]);
    await loadTypes(client, catalog, oids);
    expect(catalog.jsonEncoder(2249)(result.rows[0][0])).toBe('"(1,\\"a b\\")"');
    // to_json() says {"f1":1,"f2":"a b"} and {"x":1,"y":"a"}: the same text, other names.
    expect(catalog.jsonEncoder(2249)(result.rows[0][1])).toBe('"(1,a)"');
  });

  it('sees a composite altered under the same oid once it loads it again', async () => {
    const type = `pg_temp.sluice_altered_${SUFFIX}`;
    await client.query(`CREATE TYPE ${type} AS (a int)`);
    const oid = Number(
      (await client.query<{ oid: string }>(`SELECT '${type}'::regtype::oid AS oid`)).rows[0].oid,
    );
    const own = new TypeCatalog();
    await loadTypes(client, own, [oid]);
    expect(own.loadedComposites([oid])).toEqual([oid]);
    expect(own.jsonEncoder(oid)('(1)')).toBe('{"a":1}');
    await client.query(`ALTER TYPE ${type} ADD ATTRIBUTE b text`);
    await client.query(`ALTER TYPE ${type} RENAME ATTRIBUTE a TO c`);
    // Stale attributes: a value of the new shape stays a string rather than take wrong names.
    expect(own.jsonEncoder(oid)('(1,x)')).toBe('"(1,x)"');
    const rows = await client.query<Record<string, unknown>>(TYPE_INFO_SQL, [[oid]]);
    own.add(rows.rows.map(rowToTypeInfo), [oid]);
    await loadTypes(client, own, [oid]);
    expect(own.jsonEncoder(oid)('(1,x)')).toBe('{"c":1,"b":"x"}');
    await client.query(`DROP TYPE ${type}`);
  });
});

describe('jsonValueEncoder without type info', () => {
  const none = (): PgTypeInfo | undefined => undefined;

  it('encodes built-in scalar types by oid alone', () => {
    expect(jsonValueEncoder(23, none)('42')).toBe('42');
    expect(jsonValueEncoder(16, none)('t')).toBe('true');
    expect(jsonValueEncoder(1184, none)('2024-01-01 00:00:00+00')).toBe(
      '"2024-01-01T00:00:00+00:00"',
    );
  });

  it('encodes an unknown type as a JSON string', () => {
    expect(jsonValueEncoder(999999, none)('{1,2}')).toBe('"{1,2}"');
  });

  it.each([
    [1082, '28.11.2026'],
    [1082, '11/28/2026'],
    [1082, '11-28-2026'],
    [1114, '28.11.2026 11:22:33'],
    [1114, 'Sat Nov 28 11:22:33 2026'],
    [1184, 'Sat Nov 28 11:22:33 2026 UTC'],
    [1184, '11/28/2026 11:22:33 UTC'],
  ])('refuses type %s printed in another DateStyle (%s): to_json() prints ISO', (oid, text) => {
    expect(() => jsonValueEncoder(oid, none)(text)).toThrow(
      expect.objectContaining({ code: 'DATA_ERROR', sqlState: '22007' }),
    );
  });

  it('takes ISO dates of every year, and infinity', () => {
    expect(jsonValueEncoder(1082, none)('12345-01-02')).toBe('"12345-01-02"');
    expect(jsonValueEncoder(1082, none)('0044-03-15 BC')).toBe('"0044-03-15 BC"');
    expect(jsonValueEncoder(1114, none)('-infinity')).toBe('"-infinity"');
  });
});

describe('jsonValueEncoder for hstore (its cast to json)', () => {
  let client: Client;
  let hstore = '';
  let ownSchema: string | undefined;
  const catalog = new TypeCatalog();
  const WITH_HSTORE = `pg_temp.sluice_with_hstore_${SUFFIX}`;
  const DOMAIN_HSTORE = `pg_temp.sluice_dhstore_${SUFFIX}`;

  beforeAll(async () => {
    client = await connectTestDatabase();
    // An extension lives once per database: use the one there, or install it in a schema of ours.
    const found = await client.query<{ schema: string }>(
      `SELECT extnamespace::regnamespace::text AS schema FROM pg_extension WHERE extname = 'hstore'`,
    );
    if (found.rows.length === 0) {
      ownSchema = `sluice_hstore_${SUFFIX}`;
      await client.query(`CREATE SCHEMA ${ownSchema}`);
      await client.query(`CREATE EXTENSION hstore SCHEMA ${ownSchema}`);
    }
    hstore = `${ownSchema ?? found.rows[0].schema}.hstore`;
    await client.query(`CREATE TYPE ${WITH_HSTORE} AS (k int, h ${hstore}, hs ${hstore}[])`);
    await client.query(`CREATE DOMAIN ${DOMAIN_HSTORE} AS ${hstore}`);
  });

  afterAll(async () => {
    try {
      await client.query(`DROP TYPE IF EXISTS ${WITH_HSTORE}`);
      await client.query(`DROP DOMAIN IF EXISTS ${DOMAIN_HSTORE}`);
      if (ownSchema) await client.query(`DROP SCHEMA ${ownSchema} CASCADE`);
    } finally {
      await client.end();
    }
  });

  const VALUES = [
    `''`,
    `'a=>b'`,
    e(`"x y"=>"", z=>NULL, "\\\\"=>"\\"", "é😀"=>"tab\there", "NULL"=>"NULL"`),
  ];

  it.each([
    ['hstore', () => hstore, VALUES],
    ['hstore[]', () => `${hstore}[]`, [`ARRAY[${VALUES.join(', ')}, NULL]`, `'{}'`]],
    ['domain over hstore', () => DOMAIN_HSTORE, VALUES],
    [
      'composite with hstore fields',
      () => WITH_HSTORE,
      [`row(1, ${VALUES[2]}, ARRAY[${VALUES[1]}, NULL])`, `row(2, NULL, NULL)`],
    ],
  ])('matches to_json() for %s', async (_title, type, values) => {
    const rows = values.map((value) => `((${value})::${type()})`).join(', ');
    const result = await client.query<[string, string]>({
      text: `SELECT v, to_json(v)::text FROM (VALUES ${rows}) t(v)`,
      rowMode: 'array',
      types: RAW_TEXT,
    });
    const oid = result.fields[0].dataTypeID;
    await loadTypes(client, catalog, [oid]);
    const encode = catalog.jsonEncoder(oid);
    expect(result.rows.map(([text]) => [text, text === null ? null : encode(text)])).toEqual(
      result.rows,
    );
    expect(result.rows).toHaveLength(values.length);
  });

  it('knows hstore by its cast, and carries it as JSON in the columnar formats', async () => {
    const oid = Number(
      (await client.query<{ oid: string }>(`SELECT '${hstore}'::regtype::oid AS oid`)).rows[0].oid,
    );
    await loadTypes(client, catalog, [oid]);
    const info = (await client.query<Record<string, unknown>>(TYPE_INFO_SQL, [[oid]])).rows.map(
      rowToTypeInfo,
    )[0];
    expect(info.jsonCast).toBe('hstore');
    expect(catalog.objectJson(oid)?.list).toBe(false);
    expect(catalog.objectJson(oid)?.element('"a"=>"1"')).toBe('{"a": "1"}');
  });

  it('leaves another cast to json to the server: the value stays a JSON string', async () => {
    const type = `pg_temp.sluice_cast_enum_${SUFFIX}`;
    await client.query(`CREATE TYPE ${type} AS ENUM ('on', 'off')`);
    await client.query(
      `CREATE FUNCTION pg_temp.sluice_cast_${SUFFIX}(${type}) RETURNS json
         LANGUAGE sql IMMUTABLE AS $$ SELECT json_build_object('state', $1::text) $$`,
    );
    await client.query(
      `CREATE CAST (${type} AS json) WITH FUNCTION pg_temp.sluice_cast_${SUFFIX}(${type})`,
    );
    const result = await client.query<[string, string]>({
      text: `SELECT v, to_json(v)::text FROM (VALUES ('on'::${type})) t(v)`,
      rowMode: 'array',
      types: RAW_TEXT,
    });
    expect(result.rows[0]).toEqual(['on', '{"state" : "on"}']);
    const own = new TypeCatalog();
    await loadTypes(client, own, [result.fields[0].dataTypeID]);
    expect(own.jsonEncoder(result.fields[0].dataTypeID)('on')).toBe('"on"');
    await client.query(`DROP TYPE ${type} CASCADE`);
  });
});
