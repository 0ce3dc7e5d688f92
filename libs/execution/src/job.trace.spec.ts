import { JobTrace, operationOf } from './job.trace';
import type { ExecuteJobData } from '@app/contracts';

describe(JobTrace.name, () => {
  it.each([
    ['select 1', 'SELECT'],
    ['  -- a comment\n/* another */ with t as (select 1) select * from t', 'WITH'],
    ['insert into t values ($1)', 'INSERT'],
    ['(select 1)', undefined],
  ])('names the operation of %j %s', (text, operation) => {
    expect(operationOf(text)).toBe(operation);
  });

  it('makes no spans for a job without a trace, or in a process that exports none', () => {
    const job = { queryId: 'q', lane: 'interactive', enqueuedAt: 0 } as ExecuteJobData;
    const settings = {
      endpoint: 'http://collector:4318/v1/traces',
      protocol: 'http/json' as const,
      sampler: 'always_on' as const,
      samplerRatio: 1,
      resourceAttributes: {},
      statements: false,
      sqlcommenter: false,
    };
    expect(JobTrace.taken(job, { system: 'bullmq', settings })).toBeUndefined();
    const traced = { ...job, trace: { traceparent: `00-${'1'.repeat(32)}-${'2'.repeat(16)}-01` } };
    // Tracing was never started in this process.
    expect(JobTrace.taken(traced, { system: 'bullmq', settings })).toBeUndefined();
  });
});
