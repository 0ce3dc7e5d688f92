import { Status } from '@app/contracts';

/** Failure of an execution after its query id exists: answered in the envelope with the id. */
export class ExecutionFailedError extends Error {
  constructor(
    readonly queryId: string,
    readonly httpStatus: number,
    readonly status: Status,
    readonly headers: Record<string, string> = {},
  ) {
    super(status.reason);
    this.name = 'ExecutionFailedError';
  }
}
