import { Status, withheldReason } from '@app/contracts';

/**
 * A job's return value (the worker's ExecutionOutcome) as the queue dashboard shows it: a failure's
 * reason only as its kind of error, and no cause. Both may quote the statement's parameter values
 * (see withheldReason), and bull-board hands the formatter the return value alone, not whether the
 * job had values: the dashboard withholds every failure's reason (the admin page shows those of
 * queries without values).
 */
export function redactJobResult(value: unknown): unknown {
  if (!value || typeof value !== 'object') return value;
  const outcome = value as { status?: Status; cause?: unknown };
  const shown: Record<string, unknown> = { ...outcome };
  if (isStatus(outcome.status)) shown.status = withheldReason(outcome.status);
  if (outcome.cause !== undefined) shown.cause = '[redacted]';
  return shown;
}

function isStatus(value: unknown): value is Status {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Status).vendor_code === 'number' &&
    typeof (value as Status).reason === 'string'
  );
}
