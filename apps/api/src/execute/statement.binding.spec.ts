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
});
