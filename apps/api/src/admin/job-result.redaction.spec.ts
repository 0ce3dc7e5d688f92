import { okStatus, pgErrorStatus } from '@app/contracts';
import { redactJobResult } from './job-result.redaction';

describe(redactJobResult.name, () => {
  it("withholds a failure's reason and cause, and keeps the rest", () => {
    const outcome = {
      status: pgErrorStatus('invalid input syntax for type integer: "hunter2"', '22P02'),
      rows: 0,
      bytes: 0,
      cause: 'hunter2',
    };
    const shown = redactJobResult(outcome);
    expect(shown).toEqual({
      status: {
        reason: "data exception (the reason is shown to the query's owner only)",
        sql_state: '22P02',
        vendor_code: -520,
      },
      rows: 0,
      bytes: 0,
      cause: '[redacted]',
    });
    expect(JSON.stringify(shown)).not.toContain('hunter2');
    expect(outcome.status.reason).toContain('hunter2');
  });

  it('keeps a success, and passes through what is not an outcome', () => {
    const ok = { status: okStatus('SELECT 1', { row_count: 1 }), rows: 1, bytes: 10 };
    expect(redactJobResult(ok)).toEqual(ok);
    expect(redactJobResult(undefined)).toBeUndefined();
    expect(redactJobResult('text')).toBe('text');
  });
});
