import { inexactNumber, isExactNumber } from './exact-numbers';

describe(inexactNumber.name, () => {
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
    expect(inexactNumber(`{"params":{"x":${literal}}}`)).toBeUndefined();
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
    expect(inexactNumber(`{"statement":"select {x}","params":{"x":[1,${literal}]}}`)).toBe(literal);
  });

  it('looks at numbers only, not at digits inside strings', () => {
    expect(inexactNumber('{"s":"9007199254740993 \\" 1e400","n":1}')).toBeUndefined();
  });
});
