import fc from 'fast-check';
import {
  BoundStatement,
  InvalidParameterError,
  MissingParameterError,
  bindPlaceholders,
} from './placeholder.binder';

const NAMES = ['p', 'q', 'r_1', 'Sx'] as const;
type Name = (typeof NAMES)[number];
type Value = string | number | boolean;

/** A piece of a statement and what the binder must turn it into. */
type Segment =
  { kind: 'sql'; text: string } | { kind: 'bare'; name: Name } | { kind: 'quoted'; name: Name };

const OID_UNKNOWN = 0;
const OID_BOOL = 16;
const OID_INT4 = 23;

function encoded(value: Value): { text: string; type: number } {
  if (typeof value === 'boolean') return { text: String(value), type: OID_BOOL };
  if (typeof value === 'number') return { text: String(value), type: OID_INT4 };
  return { text: value, type: OID_UNKNOWN };
}

/** Text of a fragment that may hold anything but the characters that would end it. */
const content = (forbidden: string) =>
  fc
    .array(
      fc.constantFrom(
        'a',
        ' ',
        '{',
        '}',
        '{p}',
        '{q}',
        '{nope}',
        'é',
        '$1',
        ':',
        ';',
        "'",
        '"',
        '\\',
        '$',
        '*',
        '/',
        '-',
      ),
      {
        maxLength: 8,
      },
    )
    .map((parts) => parts.join(''))
    .filter((text) => ![...forbidden].some((c) => text.includes(c)) && !text.includes('--'));

const untouched: fc.Arbitrary<Segment> = fc
  .oneof(
    fc.constantFrom(
      'select',
      'from',
      't',
      '1',
      '+',
      ',',
      '=',
      '(',
      ')',
      '::int',
      'where',
      'x',
      'and',
    ),
    content("'\n").map((c) => `'${c}'`),
    content("'\\\n").map((c) => `E'${c}'`),
    content('$').map((c) => `$x$${c}$x$`),
    content('"').map((c) => `"${c}"`),
    content('*/').map((c) => `/*${c}*/`),
  )
  .map((text) => ({ kind: 'sql' as const, text }));

const segment: fc.Arbitrary<Segment> = fc.oneof(
  { weight: 3, arbitrary: untouched },
  {
    weight: 1,
    arbitrary: fc.constantFrom(...NAMES).map((name) => ({ kind: 'bare' as const, name })),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(...NAMES).map((name) => ({ kind: 'quoted' as const, name })),
  },
);

const value: fc.Arbitrary<Value> = fc.oneof(
  fc.string({ maxLength: 6 }),
  fc.integer(),
  fc.boolean(),
);

/**
 * What bindPlaceholders must return for these segments joined by spaces: each placeholder a
 * `$n`, numbered by first use of (type, name), literal `'{name}'` bound untyped, the rest as is.
 */
function expected(
  segments: Segment[],
  params: Record<Name, Value>,
  lineComment: string,
): BoundStatement {
  const slots = new Map<string, number>();
  const out: BoundStatement = { text: '', values: [], types: [], names: [] };
  const bind = (name: Name, type: number): string => {
    const key = `${type}:${name}`;
    if (!slots.has(key)) {
      out.values.push(encoded(params[name]).text);
      out.types.push(type);
      out.names.push(name);
      slots.set(key, out.values.length);
    }
    return `$${slots.get(key)}`;
  };
  const parts = segments.map((s) => {
    if (s.kind === 'bare') return bind(s.name, encoded(params[s.name]).type);
    if (s.kind === 'quoted') return bind(s.name, OID_UNKNOWN);
    // A plain literal that is exactly '{name}' for a given name is the quoted form.
    const quoted = /^'\{([A-Za-z_][A-Za-z0-9_]*)\}'$/.exec(s.text);
    if (quoted && Object.hasOwn(params, quoted[1])) return bind(quoted[1] as Name, OID_UNKNOWN);
    return s.text;
  });
  out.text = [...parts, lineComment].filter((p) => p !== '').join(' ');
  return out;
}

function source(segments: Segment[], lineComment: string): string {
  const parts = segments.map((s) =>
    s.kind === 'sql' ? s.text : s.kind === 'bare' ? `{${s.name}}` : `'{${s.name}}'`,
  );
  return [...parts, lineComment].filter((p) => p !== '').join(' ');
}

describe('bindPlaceholders (property-based)', () => {
  it('binds exactly the placeholders outside literals, identifiers, dollar quotes and comments', () => {
    fc.assert(
      fc.property(
        fc.array(segment, { maxLength: 16 }),
        fc.record({ p: value, q: value, r_1: value, Sx: value }),
        fc.option(
          content('\n\r').map((c) => `-- ${c}`),
          { nil: '' },
        ),
        (segments, params, lineComment) => {
          const statement = source(segments, lineComment);
          const want = statement.includes('{')
            ? expected(segments, params, lineComment)
            : { text: statement, values: [], types: [], names: [] };
          expect(bindPlaceholders(statement, params)).toEqual(want);
        },
      ),
      { numRuns: 1000 },
    );
  });

  const soup = fc
    .array(
      fc.oneof(
        fc.constantFrom(
          '{',
          '}',
          '{p}',
          '{q}',
          '{zz}',
          "'",
          "''",
          '"',
          '$',
          '$1',
          '$$',
          '$a$',
          'E',
          "E'",
          'U&',
          '\\',
          '--',
          '\n',
          '/*',
          '*/',
          ' ',
          'x',
          '9',
          'é',
          '\u0000',
          '\ud800',
        ),
        fc.string({ maxLength: 4 }),
      ),
      { maxLength: 30 },
    )
    .map((parts) => parts.join(''));
  const anyStatement = fc.oneof(soup, fc.string(), fc.string({ unit: 'binary' }));
  const anyParams = fc.dictionary(
    fc.constantFrom('p', 'q', 'zz', 'x'),
    fc.jsonValue({ maxDepth: 3 }),
  );

  it('never throws anything but its two errors, and keeps its own invariants', () => {
    fc.assert(
      fc.property(anyStatement, anyParams, (statement, params) => {
        let bound: BoundStatement;
        try {
          bound = bindPlaceholders(statement, params);
        } catch (err) {
          expect(err instanceof MissingParameterError || err instanceof InvalidParameterError).toBe(
            true,
          );
          return;
        }
        expect(bound.values).toHaveLength(bound.names.length);
        expect(bound.types).toHaveLength(bound.names.length);
        for (const name of bound.names) expect(Object.hasOwn(params, name)).toBe(true);
        for (let n = 1; n <= bound.values.length; n++) {
          expect(bound.text).toMatch(new RegExp(`\\$${n}(?![0-9])`));
        }
        if (!statement.includes('{')) expect(bound.text).toBe(statement);
        expect(bindPlaceholders(statement, params)).toEqual(bound);
      }),
      { numRuns: 2000 },
    );
  });

  it('never puts a value into the statement text', () => {
    fc.assert(
      fc.property(
        soup,
        fc.uniqueArray(fc.nat(), { minLength: 4, maxLength: 4 }),
        (statement, ids) => {
          const markers = ids.map((id) => `\u2603value${id}\u2603`);
          const params = { p: markers[0], q: [markers[1]], zz: { k: markers[2] }, x: markers[3] };
          try {
            const bound = bindPlaceholders(statement, params);
            for (const marker of markers) expect(bound.text).not.toContain(marker);
          } catch (err) {
            expect(
              err instanceof MissingParameterError || err instanceof InvalidParameterError,
            ).toBe(true);
          }
        },
      ),
      { numRuns: 2000 },
    );
  });
});
