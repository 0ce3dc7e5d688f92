import { ExecuteJobData } from '@app/contracts';
import { redactJobData } from './job-data.redaction';

describe(redactJobData.name, () => {
  const job: ExecuteJobData = {
    queryId: '6f1c1d2e-0000-4000-8000-000000000000',
    text: 'select $1::text, $2',
    values: ['hunter2', null],
    types: [0, 23],
    username: 'alice',
    role: 'app',
    readOnly: false,
    format: 'json',
    layout: 'array',
    fetchSize: 0,
    lane: 'interactive',
    enqueuedAt: 1,
  };

  it('replaces every parameter value, null ones too, and keeps the rest', () => {
    expect(redactJobData(job)).toEqual({ ...job, values: ['[redacted]', '[redacted]'] });
    expect(JSON.stringify(redactJobData(job))).not.toContain('hunter2');
  });

  it("hides a database user's session id", () => {
    const session = '0f6a2c1e-7b1d-4c3e-9a55-2d9c1e0b7a11';
    const shown = redactJobData({ ...job, session });
    expect(shown).toEqual({ ...job, values: ['[redacted]', '[redacted]'], session: '[redacted]' });
    expect(JSON.stringify(shown)).not.toContain(session);
  });

  it('leaves the job it was given alone', () => {
    redactJobData(job);
    expect(job.values).toEqual(['hunter2', null]);
  });

  it('passes through data that is not a job', () => {
    expect(redactJobData(undefined)).toBeUndefined();
    expect(redactJobData({ text: 'select 1' })).toEqual({ text: 'select 1', values: undefined });
  });
});
