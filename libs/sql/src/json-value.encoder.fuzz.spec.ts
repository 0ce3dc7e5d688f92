import fc from 'fast-check';
import { parse } from 'postgres-array';
import { jsonValueEncoder } from './json-value.encoder';
import type { PgTypeInfo } from './type.info';

// The JSON encoder keeps its own one-pass reader of array text, 1.3–1.8× faster than
// postgres-array's parse() plus a join (bench/PG-TEXT.md); these properties hold it to the
// library's reading of the same text.

type Nested = (string | null | Nested)[];

const ARRAY_TYPES: Record<number, PgTypeInfo> = {
  1009: {
    oid: 1009,
    name: 'text[]',
    typtype: 'b',
    category: 'A',
    elem: 25,
    baseType: 0,
    delim: ',',
  },
  1007: {
    oid: 1007,
    name: 'integer[]',
    typtype: 'b',
    category: 'A',
    elem: 23,
    baseType: 0,
    delim: ',',
  },
};
const lookup = (oid: number): PgTypeInfo | undefined => ARRAY_TYPES[oid];

// array_out's rule: quote an element that is empty, spelled NULL in any case, or holds a brace,
// quote, backslash, the delimiter or white space; escape quotes and backslashes.
const NEEDS_QUOTES = /^$|^null$|[{}",\\ \t\n\r\v\f]/i;

function elementText(value: string | null): string {
  if (value === null) return 'NULL';
  return NEEDS_QUOTES.test(value) ? '"' + value.replace(/["\\]/g, '\\$&') + '"' : value;
}

function arrayText(value: Nested): string {
  return '{' + value.map((e) => (Array.isArray(e) ? arrayText(e) : elementText(e))).join(',') + '}';
}

/** postgres-array's reading, joined into JSON text with each element encoded. */
function libraryJson(text: string, element: (text: string) => string): string {
  const join = (array: Nested): string =>
    '[' +
    array
      .map((e) => (e === null ? 'null' : typeof e === 'string' ? element(e) : join(e)))
      .join(',') +
    ']';
  return join(parse(text));
}

/** A rectangular array of 1 to 3 dimensions, as PostgreSQL allows them (no empty sub-arrays). */
function rectangular<T>(leaf: fc.Arbitrary<T>): fc.Arbitrary<(T | (T | T[])[])[]> {
  return fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 1, maxLength: 3 }).chain((dims) => {
    const build = (d: number): fc.Arbitrary<unknown> =>
      d === dims.length - 1
        ? fc.array(leaf, { minLength: dims[d], maxLength: dims[d] })
        : fc.array(build(d + 1), { minLength: dims[d], maxLength: dims[d] });
    return build(0) as fc.Arbitrary<(T | (T | T[])[])[]>;
  });
}

const texts = fc.oneof(
  fc.string({
    unit: fc.constantFrom('a', 'Z', ' ', '"', '\\', ',', '{', '}', '\t', 'é', '東', '🚀'),
  }),
  fc.constantFrom('NULL', 'null', 'Null', '', ' x ', '[0:1]', '='),
  fc.constant(null),
);
const ints = fc.oneof(fc.integer().map(String), fc.constant(null));

describe('jsonValueEncoder on array text', () => {
  it('reads text[] as postgres-array does', () => {
    const encode = jsonValueEncoder(1009, lookup);
    fc.assert(
      fc.property(rectangular(texts), (value) => {
        const text = arrayText(value);
        const json = encode(text);
        expect(json).toBe(libraryJson(text, (e) => JSON.stringify(e)));
        expect(JSON.parse(json)).toEqual(value);
      }),
      { numRuns: 2000 },
    );
  });

  it('reads integer[] with lower bounds as postgres-array does', () => {
    const encode = jsonValueEncoder(1007, lookup);
    fc.assert(
      fc.property(
        fc.array(ints, { minLength: 1, maxLength: 8 }),
        fc.integer({ min: -5, max: 5 }),
        (value, lower) => {
          const text = `[${lower}:${lower + value.length - 1}]=` + arrayText(value);
          const json = encode(text);
          expect(json).toBe(libraryJson(text, (e) => e));
          expect(JSON.parse(json)).toEqual(value.map((e) => (e === null ? null : Number(e))));
        },
      ),
      { numRuns: 1000 },
    );
  });
});
