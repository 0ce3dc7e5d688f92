import { ExecuteJobData } from '@app/contracts';

/** Job data as the queue dashboard shows it: the values of bind parameters never appear. */
export function redactJobData(data: Partial<ExecuteJobData> | undefined): unknown {
  if (!data || typeof data !== 'object') return data;
  return {
    ...data,
    values: Array.isArray(data.values) ? data.values.map(() => '[redacted]') : data.values,
  };
}
