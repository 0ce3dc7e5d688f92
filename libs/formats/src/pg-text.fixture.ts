import { TypeCatalog } from '@app/sql';
import { EncoderColumn, TextRow } from './result.encoder';

/**
 * Shared by the columnar encoders' specs: one value of every common type per column, as
 * PostgreSQL prints it (TimeZone UTC, DateStyle ISO), and what a reader must get back — integers
 * as numbers (int8 as bigint), dates as days and times / timestamps as µs since 1970 / midnight,
 * uuid and bytea as hex, arrays as arrays (multi-dimensional ones flattened), the rest as text.
 */
function col(name: string, type: string, oid: number): EncoderColumn {
  return { name, type, oid, json: (s) => s };
}

export const FIXTURE_COLUMNS: EncoderColumn[] = [
  col('i2', 'smallint', 21),
  col('i4', 'integer', 23),
  col('i8', 'bigint', 20),
  col('num', 'numeric', 1700),
  col('f4', 'real', 700),
  col('f8', 'double precision', 701),
  col('txt', 'text', 25),
  col('vc', 'character varying', 1043),
  col('b', 'boolean', 16),
  col('d', 'date', 1082),
  col('tm', 'time without time zone', 1083),
  col('ts', 'timestamp without time zone', 1114),
  col('tstz', 'timestamp with time zone', 1184),
  col('u', 'uuid', 2950),
  col('j', 'json', 114),
  col('jb', 'jsonb', 3802),
  col('by', 'bytea', 17),
  col('ia', 'integer[]', 1007),
  col('ta', 'text[]', 1009),
  col('iv', 'interval', 1186),
];

// Text as PostgreSQL prints it (TimeZone UTC, DateStyle ISO), and what must be read back.
export const FIXTURE_CASES: [TextRow, unknown[]][] = [
  [
    [
      '-32768',
      '-2147483648',
      '-9223372036854775808',
      '1234567890123456789012345678901234567890.5',
      '3.4028235e+38',
      'NaN',
      'héllo 東京 🚀',
      '',
      't',
      '2024-02-29',
      '13:14:15.5',
      '2024-01-02 03:04:05.123456',
      '2024-01-02 03:04:05.123456+00',
      'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
      '{"a": [1, 2.50]}',
      '{"a": [1, 2.50], "b": null}',
      '\\xdeadbeef',
      '{1,2,NULL}',
      '{"a,b","c\\"d",NULL,"NULL"}',
      '1 year 2 mons 3 days 04:05:06.5',
    ],
    [
      -32768,
      -2147483648,
      -9223372036854775808n,
      '1234567890123456789012345678901234567890.5',
      3.4028234663852886e38,
      NaN,
      'héllo 東京 🚀',
      '',
      true,
      19782,
      47655500000n,
      1704164645123456n,
      1704164645123456n,
      'a0eebc999c0b4ef8bb6d6bb9bd380a11',
      '{"a": [1, 2.50]}',
      '{"a": [1, 2.50], "b": null}',
      'deadbeef',
      [1, 2, null],
      ['a,b', 'c"d', null, 'NULL'],
      '1 year 2 mons 3 days 04:05:06.5',
    ],
  ],
  [
    [
      '32767',
      '2147483647',
      '9223372036854775807',
      'NaN',
      '-Infinity',
      'Infinity',
      'a\nb\t"c"',
      'x',
      'f',
      '0044-03-15 BC',
      '00:00:00',
      '0044-03-15 12:00:00 BC',
      '2024-01-02 08:34:05.5+05:30',
      '00000000-0000-0000-0000-000000000000',
      '[]',
      '"s"',
      '\\x',
      '{}',
      '{}',
      '-00:00:01',
    ],
    [
      32767,
      2147483647,
      9223372036854775807n,
      'NaN',
      -Infinity,
      Infinity,
      'a\nb\t"c"',
      'x',
      false,
      -735160,
      0n,
      -63517780800000000n,
      1704164645500000n,
      '00000000000000000000000000000000',
      '[]',
      '"s"',
      '',
      [],
      [],
      '-00:00:01',
    ],
  ],
  [
    [
      '0',
      '0',
      '42',
      '-0.000001',
      '1.5',
      '1e-300',
      null,
      null,
      null,
      'infinity',
      '24:00:00',
      '-infinity',
      'infinity',
      null,
      null,
      'null',
      null,
      '{{1,2},{3,4}}',
      '{"",é}',
      null,
    ],
    [
      0,
      0,
      42n,
      '-0.000001',
      1.5,
      1e-300,
      null,
      null,
      null,
      2147483647,
      86400000000n,
      -9223372036854775807n,
      9223372036854775807n,
      null,
      null,
      'null',
      null,
      [1, 2, 3, 4],
      ['', 'é'],
      null,
    ],
  ],
  [FIXTURE_COLUMNS.map(() => null), FIXTURE_COLUMNS.map(() => null)],
];

// A composite `pair (n int, label text)`, hstore and arrays of them, as the worker's type catalog
// describes them: columns whose to_json() is an object, carried as JSON by the columnar formats.
const PAIR_TYPES = new TypeCatalog();
PAIR_TYPES.add([
  { oid: 23, name: 'integer', typtype: 'b', category: 'N', elem: 0, baseType: 0, delim: ',' },
  { oid: 25, name: 'text', typtype: 'b', category: 'S', elem: 0, baseType: 0, delim: ',' },
  {
    oid: 90010,
    name: 'pair',
    typtype: 'c',
    category: 'C',
    elem: 0,
    baseType: 0,
    delim: ',',
    attributes: [
      { name: 'n', type: 23 },
      { name: 'label', type: 25 },
    ],
  },
  { oid: 90011, name: 'pair[]', typtype: 'b', category: 'A', elem: 90010, baseType: 0, delim: ',' },
  {
    oid: 90020,
    name: 'hstore',
    typtype: 'b',
    category: 'U',
    elem: 0,
    baseType: 0,
    delim: ',',
    jsonCast: 'hstore',
  },
]);

function objectColumn(name: string, type: string, oid: number): EncoderColumn {
  return {
    name,
    type,
    oid,
    json: PAIR_TYPES.jsonEncoder(oid),
    objectJson: PAIR_TYPES.objectJson(oid),
  };
}

export const OBJECT_JSON_COLUMNS: EncoderColumn[] = [
  objectColumn('p', 'pair', 90010),
  objectColumn('ps', 'pair[]', 90011),
  objectColumn('h', 'hstore', 90020),
];

/** Text as PostgreSQL prints it, and the to_json() text each value (element) must come out as. */
export const OBJECT_JSON_CASES: [TextRow, unknown[]][] = [
  [
    ['(1,"a ""b"", c")', '{"(2,x)",NULL,"(,)"}', '"k"=>"v", "n"=>NULL'],
    [
      '{"n":1,"label":"a \\"b\\", c"}',
      ['{"n":2,"label":"x"}', null, '{"n":null,"label":null}'],
      '{"k": "v", "n": null}',
    ],
  ],
  [
    ['(,)', '{}', ''],
    ['{"n":null,"label":null}', [], '{}'],
  ],
  [
    [null, null, null],
    [null, null, null],
  ],
];
