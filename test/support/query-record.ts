import { QueryRecord } from '@app/transport';

/** A query just queued, as the registry records it. */
export function queuedRecord(queryId: string, owner = 'ann'): QueryRecord {
  return {
    queryId,
    owner,
    state: 'queued',
    format: 'json',
    statement: 'select 1',
    createdAt: Date.now(),
    rows: 0,
    bytes: 0,
  };
}
