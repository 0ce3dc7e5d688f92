import { isExactNumber, jsonTextError, jsonTextProblem } from './json-text.check';

describe(jsonTextProblem.name, () => {
  it.each([
    '0',
    '-0',
    '1',
    '1.0',
    '1e2',
    '1.5e300',
    '0.1',
    '0.30000000000000004',
    '9007199254740991',
    '-9007199254740991',
    '9007199254740992',
    '1e21',
    '5e-324',
  ])('keeps %s, which a double holds exactly', (literal) => {
    expect(isExactNumber(literal)).toBe(true);
    expect(jsonTextProblem(`{"params":{"x":${literal}}}`)).toBeUndefined();
  });

  it.each([
    '9007199254740993',
    '-9223372036854775807',
    '12345678901234567890123',
    '0.12345678901234567891',
    '1e400',
    '-1e400',
    '1e-400',
  ])('finds %s, which a double would change', (literal) => {
    expect(isExactNumber(literal)).toBe(false);
    expect(jsonTextProblem(`{"statement":"select {x}","params":{"x":[1,${literal}]}}`)).toContain(
      `the JSON number ${literal} has more precision or range than a double holds`,
    );
  });

  it('looks at numbers only, not at digits inside strings', () => {
    expect(jsonTextProblem('{"s":"9007199254740993 \\" 1e400","n":1}')).toBeUndefined();
  });

  it.each([
    ['{"statement":"select 1","statement":"drop table t"}', 'statement'],
    ['{"statement":"select 1", "\\u0073tatement" : "drop table t"}', 'statement'],
    ['{"statement":"select {a}","params":{"a":1,"b":[{"c":2}],"a":3}}', 'a'],
    ['[{"x":{"y":1,"z":{}},"x":2}]', 'x'],
  ])('finds the key given twice in %s', (json, key) => {
    expect(jsonTextProblem(json)).toBe(`the JSON key "${key}" is given twice`);
  });

  it('takes the same key in different objects, and key-like strings among values', () => {
    const json =
      '{"statement":"select {a}","params":{"a":{"a":1},"b":[{"a":2},{"a":3}],"c":"statement"},' +
      '"x":["statement","statement"]}';
    expect(jsonTextProblem(json)).toBeUndefined();
  });

  it('finds a __proto__ key, also spelled with escapes', () => {
    expect(jsonTextProblem('{"statement":"select 1","__proto__":{"x":1}}')).toBe(
      'the JSON key "__proto__" is not accepted',
    );
    expect(jsonTextProblem('{"params":{"\\u005f_proto__":1}}')).toBe(
      'the JSON key "__proto__" is not accepted',
    );
    expect(jsonTextProblem('{"params":{"p":"__proto__"}}')).toBeUndefined();
  });

  it('leaves text that is not JSON to the parser', () => {
    expect(jsonTextProblem('{"a":1,"a"')).toBe('the JSON key "a" is given twice');
    expect(jsonTextProblem('{"a":"\\x"}')).toBeUndefined();
    expect(jsonTextProblem('not json')).toBeUndefined();
  });
});

describe(jsonTextError.name, () => {
  it('refuses JSON nested deeper than the limit with 413, ignoring brackets inside strings', () => {
    expect(jsonTextError('{"a":[[["[[[[[[[[{{{{"]]]}', 4)).toBeUndefined();
    expect(jsonTextError('{"a":[[[1]]]}', 4)).toBeUndefined();
    const err = jsonTextError('{"a":[[[[1]]]]}', 4);
    expect(err).toMatchObject({
      code: 'LIMIT_EXCEEDED',
      message: 'JSON nested deeper than 4 levels',
    });
  });

  it('keeps track of escaped quotes', () => {
    expect(jsonTextError('{"a":"\\"[[[[[[","b":[1]}', 2)).toBeUndefined();
  });

  it('stops at the limit however deep the text goes', () => {
    const deep = '['.repeat(200_000) + ']'.repeat(200_000);
    expect(jsonTextError(deep, 64)?.code).toBe('LIMIT_EXCEEDED');
  });

  it('refuses with 400 what jsonTextProblem finds', () => {
    expect(jsonTextError('{"a":1,"a":2}', 64)).toMatchObject({
      code: 'INVALID_REQUEST',
      message: 'the JSON key "a" is given twice',
    });
  });
});
