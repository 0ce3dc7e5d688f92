import { Span, SpanStatusCode } from '@opentelemetry/api';
import type { Status } from '@app/contracts';

/**
 * Ends a span's outcome with a query's status: an error sets the span's status, its SQLSTATE
 * (`db.response.status_code`, `error.type`) and vendor code. The reason is left out: PostgreSQL's
 * messages may quote a value, and no parameter value ever goes into a span.
 */
export function setQueryStatus(span: Span, status: Status | undefined): void {
  if (!status) return;
  span.setAttribute('sluice.vendor_code', status.vendor_code);
  if (status.vendor_code === 0) return;
  span.setAttributes({
    'db.response.status_code': status.sql_state,
    'error.type': status.sql_state,
  });
  span.setStatus({
    code: SpanStatusCode.ERROR,
    message: `SQLSTATE ${status.sql_state}, vendor code ${status.vendor_code}`,
  });
}
