import { Readable } from 'node:stream';
import { Logger } from '@nestjs/common';
import { ExecuteJobData, ResultRecord, Status, statusOf } from '@app/contracts';
import { createEncoder } from '@app/formats';
import { RESULT_STREAM_LOST, ReaderClosedError } from '@app/transport';
import { Execution } from './execution';

const logger = new Logger('Execution');

/**
 * The bytes that end a body in-band with a failure status, given the last bytes sent; null when
 * the body cannot carry one there (it is then aborted, so no client takes it for a whole one).
 */
export type LateFailureTail = (status: Status, lastSent: Buffer) => Buffer | null;

/**
 * An execution's response body: its bytes record by record, starting with `readAhead` (the
 * records read before the response was committed to); a failure the format cannot carry aborts
 * it. The body closes the execution when it ends; the response's close event must too, since a
 * body destroyed before its first read never runs.
 */
export function executionBody(
  execution: Execution,
  readAhead: ResultRecord[],
  lateFailure: LateFailureTail,
): Readable {
  return Readable.from(records(execution, readAhead, lateFailure), { objectMode: false });
}

async function* records(
  execution: Execution,
  readAhead: ResultRecord[],
  lateFailure: LateFailureTail,
): AsyncGenerator<Buffer> {
  const pending = [...readAhead];
  let lastSent: Buffer = Buffer.alloc(0);
  try {
    for (;;) {
      const record = pending.shift() ?? (await nextOrLost(execution));
      execution.sent(record);
      switch (record.kind) {
        case 'head':
        case 'data':
          if (record.bytes.length > 0) {
            lastSent = record.bytes;
            yield record.bytes;
          }
          break;
        case 'end': {
          // The reader is released with the end's write: one round trip for both. end() first:
          // a close() before it would take the query for abandoned.
          const ended = execution.end(record.status);
          const released = execution.close();
          await ended;
          await released;
          if (record.abort) throw new Error(`query failed mid-stream: ${record.status.reason}`);
          if (record.bytes.length > 0) yield record.bytes;
          return;
        }
        case 'error': {
          // Found by the api itself after the body started (the worker or the result stream was
          // lost): a worker never writes `error` once it has sent a byte.
          await execution.end(record.status);
          const tail = lateFailure(record.status, lastSent);
          if (!tail) throw new Error(`query failed mid-stream: ${record.status.reason}`);
          yield tail;
          return;
        }
      }
    }
  } catch (err) {
    // Closed by close(): the response is gone, nobody is left to tell. Closed by anything else
    // (the source shutting down), the body must not end as if it were whole: it is aborted.
    if (err instanceof ReaderClosedError && execution.closed) return;
    throw err;
  } finally {
    await execution.close();
  }
}

/**
 * The next record. A result stream that fails under the reader (Redis gone, or its node failing
 * over: what was in the stream may be gone with it) comes back as an error record, so that the
 * body ends with a failure status where its format can carry one; the producer is told to stop.
 */
async function nextOrLost(execution: Execution): Promise<ResultRecord> {
  try {
    return await execution.next();
  } catch (err) {
    if (err instanceof ReaderClosedError) throw err;
    logger.warn(`query ${execution.queryId}: its result stream failed: ${(err as Error).message}`);
    await execution.cancel();
    return {
      kind: 'error',
      status: statusOf('UNAVAILABLE', RESULT_STREAM_LOST),
    };
  }
}

/**
 * How a body that started ends when the api finds the failure itself (the worker was lost): a
 * JSON or NDJSON body gets its status in-band, as the worker would have written it — unless it
 * is compressed (the worker's compressor held the state) or its last entry was not a whole
 * chunk (a chunk larger than an entry is split over several, all but the last exactly
 * SLUICE_MAX_ENTRY_BYTES long). Any other body is aborted.
 */
export function lateFailureTail(job: ExecuteJobData, maxEntryBytes: number): LateFailureTail {
  const { format } = job;
  if (job.encoding || (format !== 'json' && format !== 'ndjson')) return () => null;
  const encoder = createEncoder(format, {
    queryId: job.queryId,
    layout: job.layout,
    columns: [],
  });
  // Where a whole chunk of each format ends: a line; the data array's opening or a row.
  const wholeEnds = format === 'ndjson' ? ['\n'] : ['[', ']', '}'];
  return (status, lastSent) => {
    const last = String.fromCharCode(lastSent[lastSent.length - 1] ?? 0);
    if (lastSent.length >= maxEntryBytes || !wholeEnds.includes(last)) return null;
    return encoder.end(status);
  };
}
