import { SluiceError } from '@app/contracts';
import { ExecuteRequestDto } from '@app/http-contracts';
import { checkName, enforceRequestLimits } from './request.limits';

const LIMITS = { maxStatementLength: 50, maxParams: 2, maxParamBytes: 10 };

function refusal(request: Partial<ExecuteRequestDto>, database?: string) {
  try {
    enforceRequestLimits({ statement: 'select 1', ...request }, LIMITS, database);
  } catch (err) {
    expect(err).toBeInstanceOf(SluiceError);
    return { code: (err as SluiceError).code, reason: (err as SluiceError).message };
  }
  return undefined;
}

describe('enforceRequestLimits', () => {
  it('accepts a request within every limit', () => {
    expect(refusal({ params: { a: 'x'.repeat(10), b: [1, 2] } }, 'test')).toBeUndefined();
    expect(refusal({ statement: 'x'.repeat(50) })).toBeUndefined();
  });

  it('refuses a statement over the length limit with LIMIT_EXCEEDED', () => {
    expect(refusal({ statement: 'x'.repeat(51) })).toEqual({
      code: 'LIMIT_EXCEEDED',
      reason: 'statement is 51 characters long; the limit is 50',
    });
  });

  it('refuses too many params and too large a param, naming it but not its value', () => {
    expect(refusal({ params: { a: 1, b: 2, c: 3 } })?.code).toBe('LIMIT_EXCEEDED');
    const big = refusal({ params: { secret: 'hunter2-hunter2' } });
    expect(big).toEqual({
      code: 'LIMIT_EXCEEDED',
      reason: 'parameter "secret" is 15 bytes; the limit is 10',
    });
    expect(refusal({ params: { o: { k: 'vvvvvvv' } } })?.code).toBe('LIMIT_EXCEEDED');
    expect(refusal({ params: { u: 'ééééé' } })?.code).toBeUndefined();
    expect(refusal({ params: { u: 'éééééé' } })?.code).toBe('LIMIT_EXCEEDED');
    // A string counts its own bytes, not its JSON text's quotes and escapes (22 bytes here).
    expect(refusal({ params: { n: '\n'.repeat(10) } })?.code).toBeUndefined();
    expect(refusal({ params: { n: '\n'.repeat(11) } })?.code).toBe('LIMIT_EXCEEDED');
  });

  it('shortens a long parameter name in the message', () => {
    const name = 'n'.repeat(1000);
    expect(refusal({ params: { [name]: 'x'.repeat(11) } })?.reason.length).toBeLessThan(120);
  });

  it.each(['database', 'schema', 'format', 'params', 'fetch_size', 'max_rows'])(
    'refuses an explicit null %s',
    (field) => {
      expect(refusal({ [field]: null })).toEqual({
        code: 'INVALID_REQUEST',
        reason: `${field} must not be null; leave it out instead`,
      });
    },
  );

  it('refuses a statement with a lone surrogate', () => {
    expect(refusal({ statement: "select '\ud800'" })?.reason).toMatch(/not valid Unicode/);
    expect(refusal({ statement: "select '😀'" })).toBeUndefined();
  });

  it('refuses a param value with a lone surrogate anywhere in it, which PostgreSQL would get as U+FFFD', () => {
    for (const value of ['a\udc00', ['\ud83d'], { k: ['x', 'y\ud800'] }, { ['\udfff']: 1 }]) {
      expect(refusal({ params: { v: value } })).toEqual({
        code: 'INVALID_REQUEST',
        reason: 'parameter "v" is not valid Unicode (a lone surrogate)',
      });
    }
    expect(refusal({ params: { v: '😀', w: ['😀'] } })).toBeUndefined();
  });

  it('refuses NUL characters in the statement, the database and the schema', () => {
    expect(refusal({ statement: 'select 1\u0000; drop table x' })?.code).toBe('INVALID_REQUEST');
    expect(refusal({}, 'te\u0000st')?.reason).toMatch(/database must not contain a NUL/);
    expect(refusal({ schema: 'a\u0000' })?.reason).toMatch(/schema must not contain a NUL/);
  });
});

describe('checkName', () => {
  it('refuses lone surrogates, which UTF-8 cannot carry', () => {
    expect(() => checkName('database', 'a\ud800')).toThrow(/not valid Unicode/);
    expect(() => checkName('database', '\udc00a')).toThrow(/not valid Unicode/);
    expect(() => checkName('database', 'a😀')).not.toThrow();
  });

  it('takes 1 to 63 bytes', () => {
    expect(() => checkName('schema', 'a'.repeat(63))).not.toThrow();
    expect(() => checkName('schema', 'a'.repeat(64))).toThrow(/1 to 63 bytes/);
    expect(() => checkName('schema', 'é'.repeat(32))).toThrow(/1 to 63 bytes/);
    expect(() => checkName('schema', '')).toThrow(/1 to 63 bytes/);
  });
});
