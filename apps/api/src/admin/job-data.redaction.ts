import { ExecuteJobData } from '@app/contracts';

/**
 * Job data as the queue dashboard shows it: the values of bind parameters never appear, nor the
 * id of the session whose credential a database user's statement runs over.
 */
export function redactJobData(data: Partial<ExecuteJobData> | undefined): unknown {
  if (!data || typeof data !== 'object') return data;
  const shown: Record<string, unknown> = {
    ...data,
    values: Array.isArray(data.values) ? data.values.map(() => '[redacted]') : data.values,
  };
  if (data.session !== undefined) shown.session = '[redacted]';
  return shown;
}
