import { UsageError } from './usage.error';
import { parseParams } from './client.commands';

describe(parseParams.name, () => {
  it('reads a value as JSON when it is JSON: 42 a number, "42" text, null, true, an object', () => {
    expect(
      parseParams(['n=42', 's="42"', 'none=null', 'yes=true', 'j={"k":[1]}', 'f=1.5']),
    ).toEqual({ n: 42, s: '42', none: null, yes: true, j: { k: [1] }, f: 1.5 });
  });

  it('reads a value that is not JSON as text, everything after the first =', () => {
    expect(parseParams(['s=hello', 'e=a=b', 'broken=[1,', 'empty='])).toEqual({
      s: 'hello',
      e: 'a=b',
      broken: '[1,',
      empty: '',
    });
  });

  it('refuses a pair without a name', () => {
    expect(() => parseParams(['=42'])).toThrow(UsageError);
    expect(() => parseParams(['42'])).toThrow(UsageError);
  });
});
