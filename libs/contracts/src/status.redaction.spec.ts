import { pgErrorStatus, statusOf } from './error.catalogue';
import { okStatus } from './status';
import { withheldReason } from './status.redaction';

describe('withheldReason', () => {
  it('keeps the kind of error, its SQLSTATE and vendor code, and nothing the message quoted', () => {
    const cast = pgErrorStatus('invalid input syntax for type integer: "hunter2"', '22P02');
    expect(withheldReason(cast)).toEqual({
      reason: "data exception (the reason is shown to the query's owner only)",
      sql_state: '22P02',
      vendor_code: -520,
    });
    const raised = pgErrorStatus('hunter2', 'P0001');
    expect(withheldReason(raised).reason).not.toContain('hunter2');
    expect(withheldReason(raised)).toMatchObject({ sql_state: 'P0001', vendor_code: -599 });
  });

  it('withholds a reason of a status Sluice wrote too: a statement may raise any SQLSTATE', () => {
    expect(withheldReason(statusOf('CANCELLED', 'cancelled by alice')).reason).toBe(
      "query cancelled (the reason is shown to the query's owner only)",
    );
    expect(withheldReason({ reason: 'x', sql_state: 'ZZ999', vendor_code: -9999 }).reason).toBe(
      "error (the reason is shown to the query's owner only)",
    );
  });

  it('leaves a success as it is', () => {
    const ok = okStatus('INSERT 0 1', { row_count: 0 });
    expect(withheldReason(ok)).toBe(ok);
  });
});
