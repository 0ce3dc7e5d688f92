import { Client, types as pgTypes } from 'pg';
import { connectTestDatabase } from '@test/settings';
import {
  BoundStatement,
  InvalidParameterError,
  MissingParameterError,
  bindPlaceholders,
} from './placeholder.binder';

/** Asserts the statement comes back untouched, with nothing bound. */
function expectUntouched(sql: string, params: Record<string, unknown> = {}): void {
  expect(bindPlaceholders(sql, params)).toEqual({ text: sql, values: [], types: [], names: [] });
}

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected an error');
}

describe('bindPlaceholders', () => {
  describe('placeholders', () => {
    it('replaces a placeholder with a typed bind parameter', () => {
      expect(bindPlaceholders('SELECT * FROM t WHERE id = {id}', { id: 7 })).toEqual({
        text: 'SELECT * FROM t WHERE id = $1',
        values: ['7'],
        types: [23],
        names: ['id'],
      });
    });

    it('binds placeholders at the very start and end of the statement', () => {
      expect(bindPlaceholders('{a}', { a: 'x' }).text).toBe('$1');
      expect(bindPlaceholders('{a} + {b}', { a: 1, b: 2 }).text).toBe('$1 + $2');
    });

    it('keeps :: casts working', () => {
      const bound = bindPlaceholders('SELECT {x}::int, {y}::text[]::varchar[]', { x: '1', y: [] });
      expect(bound.text).toBe('SELECT $1::int, $2::text[]::varchar[]');
      expect(bound.values).toEqual(['1', '{}']);
    });

    it('maps a repeated name to the same $n and numbers names by first use', () => {
      const bound = bindPlaceholders('SELECT {b}, {a}, {b}, {a}', { a: 1, b: 'x', unused: 3 });
      expect(bound.text).toBe('SELECT $1, $2, $1, $2');
      expect(bound.names).toEqual(['b', 'a']);
      expect(bound.values).toEqual(['x', '1']);
    });

    it('leaves braces that are not well-formed placeholders alone', () => {
      expectUntouched('SELECT { x }, {1a}, {}, {x-y}, {x, {{, }');
      expectUntouched('SELECT {x');
    });

    it('keeps the bind parameter a token of its own next to identifier characters', () => {
      expect(bindPlaceholders('SELECT a{x}', { x: 1 }).text).toBe('SELECT a $1');
      expect(bindPlaceholders('SELECT {x}2', { x: 1 }).text).toBe('SELECT $1 2');
      expect(bindPlaceholders('SELECT{x}', { x: 1 }).text).toBe('SELECT $1');
    });

    it('handles unicode text around placeholders', () => {
      const bound = bindPlaceholders('SELECT \'ünï {x}\', {x} AS "日本", {x}', { x: '€ 😀' });
      expect(bound.text).toBe('SELECT \'ünï {x}\', $1 AS "日本", $1');
      expect(bound.values).toEqual(['€ 😀']);
    });
  });

  describe('missing parameters', () => {
    it('throws MissingParameterError for a placeholder without a value', () => {
      const error = thrown(() => bindPlaceholders('SELECT {a}, {b}', { a: 1 }));
      expect(error).toBeInstanceOf(MissingParameterError);
      expect(error).toMatchObject({ code: 'MISSING_PARAMETER', parameter: 'b' });
    });

    it('treats an undefined value and omitted params as missing', () => {
      expect(() => bindPlaceholders('SELECT {a}', { a: undefined })).toThrow(MissingParameterError);
      expect(() => bindPlaceholders('SELECT {a}')).toThrow(MissingParameterError);
    });

    it('does not take inherited properties as values', () => {
      expect(() => bindPlaceholders('SELECT {toString}', {})).toThrow(MissingParameterError);
      expect(() => bindPlaceholders('SELECT {constructor}', {})).toThrow(MissingParameterError);
    });
  });

  describe('string literals', () => {
    it('leaves braces inside literals with doubled quotes alone', () => {
      expectUntouched("SELECT 'it''s {x}', '{x}''', '''{x}', ''");
    });

    it('leaves JSON literals untouched', () => {
      expectUntouched(`SELECT '{"a":{"b":1}}'::jsonb, '{}'::int[]`);
    });

    it('binds a literal that is exactly {name} when name has a value', () => {
      const bound = bindPlaceholders("SELECT * FROM t WHERE name = '{name}' AND n = '{n}'", {
        name: "O'Brien",
        n: 5,
      });
      expect(bound).toEqual({
        text: 'SELECT * FROM t WHERE name = $1 AND n = $2',
        values: ["O'Brien", '5'],
        types: [0, 0],
        names: ['name', 'n'],
      });
    });

    it('leaves a {name} literal alone when name has no value', () => {
      expectUntouched("SELECT '{a}'::text[], '{b}'", { c: 1 });
      expectUntouched("SELECT '{a}'", { a: undefined });
    });

    it('binds a {name} literal as the text a substitution would have produced', () => {
      const bound = bindPlaceholders("SELECT '{n}', '{f}', '{b}', '{o}', '{a}', '{z}'", {
        n: 3000000000,
        f: 1.5,
        b: false,
        o: { k: [1] },
        a: ['x', null],
        z: null,
      });
      expect(bound.text).toBe('SELECT $1, $2, $3, $4, $5, $6');
      expect(bound.values).toEqual(['3000000000', '1.5', 'false', '{"k":[1]}', '{"x",NULL}', null]);
      expect(bound.types).toEqual([0, 0, 0, 0, 0, 0]);
    });

    it('does not bind {name} inside a larger or continued literal', () => {
      expectUntouched("SELECT '{x} ', ' {x}', '{x}'\n'tail', '{x}' -- c\n  'tail'", { x: 1 });
    });

    it('gives bare and quoted uses of one name separate slots only when their types differ', () => {
      const numbers = bindPlaceholders("SELECT {n}, '{n}', {n}", { n: 1 });
      expect(numbers).toMatchObject({
        text: 'SELECT $1, $2, $1',
        types: [23, 0],
        names: ['n', 'n'],
      });
      const strings = bindPlaceholders("SELECT {s}, '{s}'", { s: 'a' });
      expect(strings).toMatchObject({ text: 'SELECT $1, $1', types: [0], names: ['s'] });
    });

    it('pads a bound literal that touches an identifier', () => {
      expect(bindPlaceholders("SELECT'{x}'", { x: 'a' }).text).toBe('SELECT $1');
    });

    it("follows backslash escapes in E'' strings", () => {
      expectUntouched("SELECT E'\\'{x}', e'{x}', E'a''{x}', E'\\\\\\'{x}'", { x: 1 });
      // E'\\' ends after the escaped backslash, so the placeholder after it is live.
      expect(bindPlaceholders("SELECT E'\\\\', {x}", { x: 1 }).text).toBe("SELECT E'\\\\', $1");
    });

    it("never binds prefixed literals (E'', N'', B'', X'', U&'')", () => {
      expectUntouched("SELECT E'{x}', N'{x}', B'{x}', X'{x}', U&'{x}', u&'{x}'", { x: 1 });
    });

    it('does not take a longer identifier as a string prefix', () => {
      // `ne'\'` is not an E'' string: the plain literal ends at the second quote.
      expect(bindPlaceholders("SELECT ne'\\', {x}", { x: 1 }).text).toBe("SELECT ne'\\', $1");
    });
  });

  describe('quoted identifiers', () => {
    it('leaves braces inside quoted identifiers alone', () => {
      expectUntouched('SELECT 1 AS "{x}", "a""{x}""", U&"{x}"', { x: 1 });
    });

    it('binds placeholders after a quoted identifier closes', () => {
      expect(bindPlaceholders('SELECT "a""b" = {x}', { x: 1 }).text).toBe('SELECT "a""b" = $1');
    });
  });

  describe('dollar quotes', () => {
    it('leaves braces inside dollar quotes alone', () => {
      expectUntouched("SELECT $${x}$$, $fn${x} '{x}'$fn$, $_1${x}$_1$", { x: 1 });
    });

    it('ends a tagged dollar quote only at the same tag', () => {
      const sql = 'DO $outer$ BEGIN $inner$ {x} $inner$; {x} $$ {x} $outer$; SELECT {x}';
      expect(bindPlaceholders(sql, { x: 1 }).text).toBe(
        'DO $outer$ BEGIN $inner$ {x} $inner$; {x} $$ {x} $outer$; SELECT $1',
      );
    });

    it('does not take $1 as a dollar quote', () => {
      // Were `$1$` a dollar quote, {x} would be inside it and nothing would be bound.
      const error = thrown(() => bindPlaceholders('SELECT $1$ {x} $1$', { x: 1 }));
      expect(error).toBeInstanceOf(InvalidParameterError);
      expect(error).toMatchObject({ code: 'INVALID_PARAMETER', parameter: '$1' });
    });

    it('leaves positional parameters alone when no placeholder is bound', () => {
      expectUntouched("SELECT $1, $23::int, '{x}'");
    });

    it('does not open a dollar quote inside an identifier', () => {
      expect(bindPlaceholders('SELECT a$b$ + {x}', { x: 1 }).text).toBe('SELECT a$b$ + $1');
    });
  });

  describe('comments', () => {
    it('leaves braces inside line comments alone', () => {
      const bound = bindPlaceholders("SELECT {x} -- {y} '\n, {x} --", { x: 1 });
      expect(bound.text).toBe("SELECT $1 -- {y} '\n, $1 --");
    });

    it('ends a line comment at a carriage return', () => {
      expect(bindPlaceholders('-- {y}\r{x}', { x: 1 }).text).toBe('-- {y}\r$1');
    });

    it('leaves braces inside nested block comments alone', () => {
      const sql = "SELECT /* a /* {y} */ {y} ' */ {x} /**/ {x} /* ** / */";
      expect(bindPlaceholders(sql, { x: 1 }).text).toBe(
        "SELECT /* a /* {y} */ {y} ' */ $1 /**/ $1 /* ** / */",
      );
    });
  });

  describe('unterminated input', () => {
    it.each([
      ["SELECT 'abc {x}"],
      ["SELECT 'abc'' {x}"],
      ["SELECT E'abc\\' {x}"],
      ["SELECT E'\\"],
      ['SELECT "abc {x}'],
      ['SELECT /* {x}'],
      ['SELECT /* /* {x} */'],
      ['SELECT $$ {x}'],
      ['SELECT $tag$ {x} $tag'],
      ["SELECT U&'{x}"],
    ])('leaves %j as is for PostgreSQL to report', (sql) => {
      expectUntouched(sql);
    });
  });

  describe('values', () => {
    it.each([
      [0, '0', 23],
      [-0, '0', 23],
      [2147483647, '2147483647', 23],
      [-2147483648, '-2147483648', 23],
      [2147483648, '2147483648', 20],
      [-2147483649, '-2147483649', 20],
      [Number.MAX_SAFE_INTEGER, '9007199254740991', 20],
      [2 ** 63, '9223372036854776000', 1700],
      [1.5, '1.5', 1700],
      [1e21, '1e+21', 1700],
      [-1.5e-7, '-1.5e-7', 1700],
      [123n, '123', 23],
      [2n ** 40n, '1099511627776', 20],
      [2n ** 70n, '1180591620717411303424', 1700],
      [true, 'true', 16],
      [false, 'false', 16],
      ['text {x} \'"', 'text {x} \'"', 0],
      ['', '', 0],
      [null, null, 0],
      [{ a: { b: [1, 'x'] } }, '{"a":{"b":[1,"x"]}}', 3802],
      [{}, '{}', 3802],
      [[1, 2], '{1,2}', 0],
      [[1.5, -2, 1e21], '{1.5,-2,1e+21}', 0],
      [[true, false, null], '{true,false,NULL}', 0],
      [
        ['a b', null, 'x"y', 'NULL', 'b\\s', '', '{,}'],
        '{"a b",NULL,"x\\"y","NULL","b\\\\s","","{,}"}',
        0,
      ],
      [
        [
          [1, 2],
          [3, 4],
        ],
        '{{1,2},{3,4}}',
        0,
      ],
      [[[['a']], [['b']]], '{{{"a"}},{{"b"}}}', 0],
      [[], '{}', 0],
      [[[], []], '{}', 0],
      [[1, { a: 1 }], '[1,{"a":1}]', 3802],
      [[[1], [2, { a: 1 }]], '[[1],[2,{"a":1}]]', 3802],
    ])('encodes %j as %j with type %i', (value, text, type) => {
      expect(bindPlaceholders('SELECT {v}', { v: value })).toMatchObject({
        values: [text],
        types: [type],
      });
    });

    it.each([
      ['NaN', NaN],
      ['Infinity', Infinity],
      ['a non-finite array element', [1, -Infinity]],
      ['a ragged array', [[1, 2], [3]]],
      ['a mix of arrays and scalars', [1, [2]]],
      ['a mix of scalars and arrays', [[1], 2]],
      ['an array nested deeper than 6', [[[[[[[1]]]]]]]],
      ['a function', () => 1],
      ['a Date', new Date(0)],
      ['a symbol', Symbol('x')],
    ])('rejects %s with InvalidParameterError', (_label, value) => {
      const error = thrown(() => bindPlaceholders('SELECT {v}', { v: value }));
      expect(error).toBeInstanceOf(InvalidParameterError);
      expect(error).toMatchObject({ code: 'INVALID_PARAMETER', parameter: 'v' });
    });

    it('rejects a cyclic array without hanging', () => {
      const cyclic: unknown[] = [];
      cyclic.push(cyclic);
      expect(() => bindPlaceholders('SELECT {v}', { v: cyclic })).toThrow(InvalidParameterError);
    });

    it('never puts a value into the SQL text', () => {
      const bound = bindPlaceholders("SELECT {v}, '{v}'", { v: "'); DROP TABLE t; --" });
      expect(bound.text).toBe('SELECT $1, $1');
    });
  });

  describe('large statements', () => {
    it('scans a 1 MB statement in linear time', () => {
      const chunk = "SELECT {a}, '{b}', $$ {c} $$, /* {c} */ \"{c}\", E'\\'{c}', x$y$ -- {c}\n";
      const sql = chunk.repeat(Math.ceil(1_000_000 / chunk.length));
      const started = performance.now();
      const bound = bindPlaceholders(sql, { a: 1, b: 'x' });
      expect(performance.now() - started).toBeLessThan(1000);
      expect(bound.values).toEqual(['1', 'x']);
      expect(bound.text.length).toBeLessThan(sql.length);
    });

    it('stays linear on pathological input', () => {
      for (const unit of ['{a', '$a', '/*', "'", '{', '$', 'e', '--\n', "''\n"]) {
        const sql = unit.repeat(Math.ceil(500_000 / unit.length));
        const started = performance.now();
        bindPlaceholders(sql, {});
        expect(performance.now() - started).toBeLessThan(1000);
      }
    });
  });

  describe('against PostgreSQL', () => {
    let client: Client;

    // No database is a failure, not a pass: connecting throws and every case below fails.
    beforeAll(async () => {
      client = await connectTestDatabase();
    });

    afterAll(async () => {
      await client?.end();
    });

    // Sends the parameter types in the Parse message, as the worker does.
    async function run(bound: BoundStatement): Promise<unknown[]> {
      const types = Object.assign([...bound.types], { getTypeParser: pgTypes.getTypeParser });
      const result = await client.query<unknown[]>({
        text: bound.text,
        values: bound.values,
        types,
        rowMode: 'array',
      });
      return result.rows[0];
    }

    it('runs placeholders typed as PostgreSQL types the equivalent literals', async () => {
      const bound = bindPlaceholders(
        'SELECT pg_typeof({i})::text, pg_typeof({l})::text, pg_typeof({n})::text, ' +
          "pg_typeof({b})::text, pg_typeof({j})::text, {i} + 1, {l} + 1, {n} * 2, {j} ->> 'k'",
        { i: 41, l: 3000000000, n: 1.25, b: true, j: { k: 'v' } },
      );
      expect(await run(bound)).toEqual([
        'integer',
        'bigint',
        'numeric',
        'boolean',
        'jsonb',
        42,
        '3000000001',
        '2.50',
        'v',
      ]);
    });

    it('runs array literals that PostgreSQL reads back element for element', async () => {
      const texts = ['a b', null, 'x"y', 'NULL', 'b\\s', '', '{,}', 'é 😀'];
      const bound = bindPlaceholders(
        "SELECT {t}::text[], {m} = ARRAY[[1,2],[3,4]], {e}::int[], {s} = ARRAY['a']",
        {
          t: texts,
          m: [
            [1, 2],
            [3, 4],
          ],
          e: [[], []],
          s: ['a'],
        },
      );
      expect(await run(bound)).toEqual([texts, true, [], true]);
    });

    it('runs quoted {name} literals bound as unknown', async () => {
      const bound = bindPlaceholders(
        "SELECT '{s}' = 'O''Brien', '{n}'::int + 1, '{o}'::jsonb ->> 'k', '{a}'::int[], '{z}'::text",
        { s: "O'Brien", n: 41, o: { k: 'v' }, a: [1, 2], z: null },
      );
      expect(await run(bound)).toEqual([true, 42, 'v', [1, 2], null]);
    });

    it('runs a statement whose literals, identifiers and comments hold braces', async () => {
      const bound = bindPlaceholders(
        "SELECT {x}::int AS \"{x}\", 'it''s {x}', E'\\'{x}', $q${x}$q$, '{\"a\":{\"b\":1}}'::jsonb " +
          '/* {y} /* {y} */ {y} */ -- {y}\n, {x} + 1',
        { x: 7 },
      );
      expect(bound.values).toEqual(['7']);
      expect(await run(bound)).toEqual([7, "it's {x}", "'{x}", '{x}', { a: { b: 1 } }, 8]);
    });
  });
});
