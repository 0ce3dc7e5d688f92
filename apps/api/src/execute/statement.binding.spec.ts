import { bindStatement } from './statement.binding';
import { refusal } from '@test/support/refusal';

/** Binding errors are the client's, with the codes the API documents (both 400). */

describe(bindStatement.name, () => {
  it('binds {name} placeholders as parameters', () => {
    expect(bindStatement('select {a}, {a}', { a: 1 })).toMatchObject({
      text: 'select $1, $1',
      values: ['1'],
    });
    expect(bindStatement('select 1', undefined)).toMatchObject({ text: 'select 1', values: [] });
  });

  it('answers a placeholder without a value with MISSING_PARAMETER', () => {
    const error = refusal(() => bindStatement('select {a}, {b}', { a: 1 }));
    expect(error).toMatchObject({
      code: 'MISSING_PARAMETER',
      message: 'no value for parameter {b}',
    });
    expect(error.http).toBe(400);
  });

  it('answers a value PostgreSQL cannot take with INVALID_REQUEST and the reason', () => {
    const error = refusal(() => bindStatement('select {v}', { v: Symbol('x') }));
    expect(error.code).toBe('INVALID_REQUEST');
    expect(error.message).toMatch(/^invalid value for parameter \{v\}: /);
    expect(error.http).toBe(400);
  });

  it('refuses a lone surrogate in the statement or a value, which would reach PostgreSQL as U+FFFD', () => {
    for (const [statement, params, where] of [
      ["select 'a\ud800'", undefined, 'the statement'],
      ['select {v}', { v: 'x\udc00' }, 'the value of parameter {v}'],
      ['select {v}', { v: ['\ud83d'] }, 'the value of parameter {v}'],
    ] as const) {
      const error = refusal(() => bindStatement(statement, params));
      expect(error.code).toBe('INVALID_REQUEST');
      expect(error.message).toContain(`${where} holds a lone UTF-16 surrogate`);
    }
    // A pair is one character.
    expect(bindStatement('select {v}', { v: '\ud83d\ude00' }).values).toEqual(['\u{1f600}']);
  });
});
