import { ResultRecord } from '@app/contracts';
import { ResultReader } from '@app/transport';

/** The client left before its response started. */
export class ClientGoneError extends Error {
  constructor() {
    super('client went away');
    this.name = 'ClientGoneError';
  }
}

/**
 * Reads until the first record that commits the response: one with bytes of a body, or a
 * terminal one. The status line goes out with the first byte of the body, so until then an error
 * is still answered with the envelope and its own HTTP code. Returns every record read, that one
 * last. Rejects with ClientGoneError as soon as `signal` aborts (the reader is left as it is), or
 * with the reader's own error.
 */
export async function readToFirstBytes(
  reader: Pick<ResultReader, 'next'>,
  signal?: AbortSignal,
): Promise<ResultRecord[]> {
  const gone = signal && clientGone(signal);
  const next = () => (gone ? Promise.race([reader.next(), gone]) : reader.next());
  const read: ResultRecord[] = [];
  let record: ResultRecord;
  do {
    record = await next();
    read.push(record);
  } while ((record.kind === 'head' || record.kind === 'data') && record.bytes.length === 0);
  return read;
}

/**
 * readToFirstBytes, for at most `ms`: undefined when the time is up first. A read still pending
 * then is left to fail when its reader closes. `ms` 0 reads nothing: the answer is 202 at once,
 * however quickly the result came (not 200 or 202 by a race).
 */
export async function readWithin(
  reader: Pick<ResultReader, 'next'>,
  signal: AbortSignal | undefined,
  ms: number,
): Promise<ResultRecord[] | undefined> {
  if (ms <= 0) return undefined;
  const reading = readToFirstBytes(reader, signal);
  let timer: NodeJS.Timeout | undefined;
  const timeUp = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([reading, timeUp]);
  } finally {
    clearTimeout(timer);
    // Lost the race: it fails with ReaderClosedError once the reader is let go.
    reading.catch(() => undefined);
  }
}

/**
 * The reader's next record, or ClientGoneError as soon as `signal` aborts (at once if it has). A
 * read that loses the race fails when its reader is closed.
 */
export function nextUnlessGone(
  reader: Pick<ResultReader, 'next'>,
  signal: AbortSignal | undefined,
): Promise<ResultRecord> {
  if (!signal) return reader.next();
  const next = reader.next();
  // Raced below: if the client went first, nobody awaits `next` any more, and its failure
  // (the reader closed as the request ends) must not count as unhandled.
  next.catch(() => undefined);
  return Promise.race([next, clientGone(signal)]);
}

/** Rejects with ClientGoneError once the signal aborts (at once if it has). */
function clientGone(signal: AbortSignal): Promise<never> {
  return new Promise<never>((_, reject) => {
    const onAbort = () => reject(new ClientGoneError());
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
}
