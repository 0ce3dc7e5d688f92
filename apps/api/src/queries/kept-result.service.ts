import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { Readable } from 'node:stream';
import {
  FINAL_STATES,
  finalState,
  ResultFormat,
  ResultManifest,
  ResultRecord,
  ResultSegmentInfo,
  SluiceError,
  Status,
  bodyBytesOf,
  httpStatusOf,
  statusOf,
} from '@app/contracts';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { QueryLifecycle } from '@app/execution';
import {
  JobQueue,
  QueryRecord,
  QueryRecords,
  ResultReader,
  ResultSink,
  ResultSource,
  ResultSpool,
  SpoolMissingError,
  SpoolUnavailableError,
  SpooledResultReader,
  segmentPrefix,
} from '@app/transport';
import { ExecutionResponse } from '../execute/execution.response';
import { contentTypeOf } from '../execute/media.negotiator';
import { ApiMetricsService } from '../metrics/api-metrics.service';
import { ClientGoneError, nextUnlessGone } from '../execute/first-record';
import { ExecutionFailedError } from '../http/execution-failed.error';
import { ProducerWatch } from './producer.watch';
import {
  JOB_QUEUE,
  QUERY_REGISTRY,
  RESULT_SINK,
  RESULT_SOURCE,
  RESULT_SPOOL,
} from '../infra/tokens';

/**
 * `bytes=N-` (the one form a resumed download sends); undefined for anything else. An N past
 * 2^53 is Infinity: beyond every body, so unsatisfiable (416), not ignored.
 */
export function rangeStart(header: string | undefined): number | undefined {
  const match = /^bytes=(\d+)-$/.exec(header?.trim() ?? '');
  if (!match) return undefined;
  const start = Number(match[1]);
  return Number.isSafeInteger(start) ? start : Number.POSITIVE_INFINITY;
}

/**
 * The kept result of an asynchronous query, as its owner fetches it (GET
 * /v1/queries/{id}/result): the body's bytes exactly as the query's own response would have
 * sent them, in its format and compression, from the start — while the query still runs, as they
 * come. A finished query's result also answers `Range: bytes=N-` with 206 from byte N.
 */
@Injectable()
export class KeptResultService {
  private readonly logger = new Logger(KeptResultService.name);
  /**
   * Readers of kept results open in this process, per owner. Each holds a blocking Redis
   * connection of its own (and a socket) while it waits: uncapped, one user's fetches, each
   * opened and dropped, could take every client Redis allows.
   */
  private readonly reading = new Map<string, number>();

  constructor(
    @Inject(QUERY_REGISTRY) private readonly registry: QueryRecords,
    @Inject(RESULT_SOURCE) private readonly results: ResultSource,
    @Inject(JOB_QUEUE) private readonly queue: JobQueue,
    @Inject(RESULT_SINK) private readonly sink: ResultSink,
    private readonly lifecycle: QueryLifecycle,
    private readonly watch: ProducerWatch,
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
    @Inject(RESULT_SPOOL) private readonly spool: ResultSpool | null,
    @Optional() private readonly metrics?: ApiMetricsService,
  ) {}

  /**
   * `signal` aborts when the client leaves: a fetch still waiting for its first record (a query
   * that runs on) closes its reader then, not when the query's first bytes come.
   */
  async fetch(
    record: QueryRecord,
    range: string | undefined,
    signal?: AbortSignal,
  ): Promise<ExecutionResponse> {
    const { queryId } = record;
    if (!record.kept) {
      throw new SluiceError(
        'NOT_FOUND',
        `query ${queryId} keeps no result: only a query sent with wait_timeout (or Prefer: respond-async) does`,
      );
    }
    const finished = FINAL_STATES.includes(record.state);
    if (finished && !(await this.results.kept(queryId))) {
      throw new SluiceError('RESULT_GONE', `the result of query ${queryId} is no longer kept`);
    }
    const open = (start = 0) =>
      new SpooledResultReader(
        this.counted(record, () =>
          this.results.openKept(queryId, { onSilence: this.silenceCheck(record) }),
        ),
        this.spool ?? undefined,
        start,
      );
    // A finished spooled result whose segments are not all in the store is lost: said at once,
    // never sent as a body that stops short.
    const manifest = finished && this.spool ? await this.spooled(queryId) : undefined;
    const reader = open();
    const response: ExecutionResponse = {
      queryId,
      contentType: contentTypeOf(record.format as ResultFormat),
      contentEncoding: record.encoding,
      headers: { 'accept-ranges': 'bytes' },
      body: Buffer.alloc(0),
      close: () => reader.close(),
    };
    try {
      const start = finished ? rangeStart(range) : undefined;
      if (start === undefined) {
        const first = await nextUnlessGone(reader, signal);
        // Ended before any byte (an error, or a producer found gone): the envelope, its own code.
        if (
          first.kind === 'error' ||
          (first.kind === 'end' && first.abort && !first.bytes.length)
        ) {
          return this.failed(queryId, first.status, reader);
        }
        // A finished spooled result's length is known: sent, the body needs no chunked framing.
        const length =
          typeof manifest === 'number' ? { 'content-length': String(manifest) } : undefined;
        return {
          ...response,
          headers: { ...response.headers, ...length },
          body: Readable.from(bodyOf(reader, first)),
        };
      }
      // Two reads, holding no more than a read's entries at a time: its length, then its bytes.
      const measured = manifest ?? (await lengthOf(reader));
      // A result that failed is its error, resumed or not: never its bytes as if they were whole.
      if (typeof measured !== 'number') return this.failed(queryId, measured.failed, reader);
      const total = measured;
      await reader.close();
      if (start >= total) {
        return {
          ...response,
          httpStatus: 416,
          headers: { ...response.headers, 'content-range': `bytes */${total}` },
        };
      }
      const from = open(start);
      return {
        ...response,
        httpStatus: 206,
        headers: {
          ...response.headers,
          'content-range': `bytes ${start}-${total - 1}/${total}`,
          'content-length': String(total - start),
        },
        body: Readable.from(bytesOf(from)),
        close: () => from.close(),
      };
    } catch (err) {
      await reader.close();
      if (err instanceof ClientGoneError) {
        // Nobody is left to answer; the query runs on and keeps its result.
        throw new ExecutionFailedError(queryId, 499, statusOf('CANCELLED', 'client went away'));
      }
      throw this.spoolFailure(queryId, err);
    }
  }

  /** A spool failure as the client is told it, counted in /metrics. */
  private spoolFailure(queryId: string, err: unknown): unknown {
    if (err instanceof SpoolMissingError || err instanceof SpoolUnavailableError) {
      this.metrics?.spoolError('read');
      this.logger.warn(`query ${queryId}: ${err.message}`);
    }
    return spoolError(queryId, err);
  }

  /**
   * The manifest of a spooled kept result (GET /v1/queries/{id}/result/segments): its segments so
   * far, with presigned URLs when SLUICE_SPOOL_PRESIGN_SECONDS > 0 and the store is S3.
   */
  async manifest(record: QueryRecord): Promise<ResultManifest> {
    const { queryId } = record;
    if (!record.kept) {
      throw new SluiceError(
        'NOT_FOUND',
        `query ${queryId} keeps no result: only a query sent with wait_timeout (or Prefer: respond-async) does`,
      );
    }
    const spool = this.spool;
    if (!spool) {
      throw new SluiceError(
        'NOT_FOUND',
        `kept results are not spooled here (no SLUICE_SPOOL_URL): fetch GET /v1/queries/${queryId}/result`,
      );
    }
    const records = await this.results.keptRecords(queryId);
    if (records.length === 0 && FINAL_STATES.includes(record.state)) {
      throw new SluiceError('RESULT_GONE', `the result of query ${queryId} is no longer kept`);
    }
    const last = records.at(-1);
    if (last?.kind === 'error' || (last?.kind === 'end' && last.abort)) {
      throw new ExecutionFailedError(queryId, httpStatusOf(last.status), last.status);
    }
    const complete = last?.kind === 'end';
    if (complete) {
      const lost = await this.missingSegment(queryId, records);
      if (lost) throw this.spoolFailure(queryId, new SpoolMissingError(lost));
    }
    const seconds = spool.kind === 's3' ? (this.config.spool?.presignSeconds ?? 0) : 0;
    const segments: ResultSegmentInfo[] = [];
    let size = 0;
    for (const r of records) {
      if (r.kind !== 'data' || !r.segment) continue;
      const info: ResultSegmentInfo = { offset: r.segment.offset, size: r.segment.size };
      if (seconds > 0) info.url = await spool.presign(r.segment.key, seconds);
      segments.push(info);
      size = r.segment.offset + r.segment.size;
    }
    return {
      query_id: queryId,
      complete,
      size,
      content_type: contentTypeOf(record.format as ResultFormat),
      content_encoding: record.encoding,
      expires_at:
        seconds > 0 && segments.length > 0
          ? new Date(Date.now() + seconds * 1000).toISOString()
          : undefined,
      segments,
    };
  }

  /**
   * A finished spooled result's length, from its manifest; or the status it failed with. Its
   * segments are all checked to be in the store first (SpoolMissingError for one that is not).
   */
  private async spooled(queryId: string): Promise<number | { failed: Status }> {
    const records = await this.results.keptRecords(queryId);
    let length = 0;
    for (const record of records) {
      if (record.kind === 'error') return { failed: record.status };
      if (record.kind === 'end' && record.abort) return { failed: record.status };
      length += bodyBytesOf(record);
    }
    const lost = await this.missingSegment(queryId, records);
    if (lost) throw this.spoolFailure(queryId, new SpoolMissingError(lost));
    return length;
  }

  /**
   * The key of a segment the records name that the store does not hold whole, if any: one gone,
   * or one held at another size than was written (cut short) — its bytes are lost either way.
   */
  private async missingSegment(
    queryId: string,
    records: ResultRecord[],
  ): Promise<string | undefined> {
    const held = new Map<string, number>();
    try {
      for await (const entry of this.spool!.list(segmentPrefix(queryId))) {
        held.set(entry.key, entry.size);
      }
    } catch (err) {
      throw this.spoolFailure(queryId, err);
    }
    for (const record of records) {
      if (record.kind === 'data' && record.segment) {
        if (held.get(record.segment.key) !== record.segment.size) return record.segment.key;
      }
    }
    return undefined;
  }

  /**
   * Opens a reader counted against its owner's cap (SLUICE_MAX_ACTIVE_PER_USER fetches at once
   * in each api process); one past it is 429. The count is given back when the reader closes.
   */
  private counted(record: QueryRecord, open: () => ResultReader): ResultReader {
    const owner = record.ownerId ?? record.owner;
    const most = this.config.maxActivePerUser;
    const now = this.reading.get(owner) ?? 0;
    if (now >= most) {
      throw new SluiceError(
        'QUEUE_FULL',
        `you are fetching ${most} kept results at once; retry when one ends`,
        undefined,
        { 'Retry-After': '1' },
      );
    }
    const reader = open();
    this.reading.set(owner, now + 1);
    let closing: Promise<void> | undefined;
    // The count goes back with the reader's one way out, however many times it is called.
    return {
      next: () => reader.next(),
      cancel: () => reader.cancel(),
      close: () =>
        (closing ??= (() => {
          const left = (this.reading.get(owner) ?? 1) - 1;
          if (left > 0) this.reading.set(owner, left);
          else this.reading.delete(owner);
          return reader.close();
        })()),
    };
  }

  /**
   * A kept result whose worker died, as any kept result that fails: it keeps only its error, and
   * its bytes are given back.
   */
  async failKept(queryId: string, status: Status): Promise<void> {
    await this.results.dropKept(queryId);
    await this.sink.end(queryId, { kind: 'error', status });
  }

  /** A query that ended with an error before any byte: its envelope, with its own HTTP code. */
  private async failed(queryId: string, status: Status, reader: ResultReader): Promise<never> {
    await reader.close();
    throw new ExecutionFailedError(queryId, httpStatusOf(status), status);
  }

  /**
   * Asked when the result is quiet. A query that ended without a last record ends the body; one
   * whose worker died (its job active, its lock gone) is recorded as failed and ends it too, and
   * so does one still queued that will not run (ProducerWatch judges all three, as for the
   * execute response), so that no fetch waits for a producer that is gone or never comes.
   */
  private silenceCheck(record: QueryRecord): () => Promise<ResultRecord | undefined> {
    const { queryId, owner } = record;
    const producer = this.watch.producerOf({
      queryId,
      lane: record.lane ?? 'interactive',
      // Its job's latest start: the api that queued it set it this long after the record's creation.
      late: () => Date.now() > record.createdAt + this.config.maxQueueWaitMs,
    });
    return async () => {
      const now = await this.registry.get(queryId);
      if (!now || FINAL_STATES.includes(now.state)) {
        const status = now?.status ?? statusOf('RESULT_GONE', 'the result is no longer kept');
        return { kind: 'end', status, bytes: Buffer.alloc(0), abort: true };
      }
      const fate = await producer();
      switch (fate.kind) {
        case 'alive':
          return undefined;
        case 'unqueued': {
          // Ended as the synchronous path ends it (504 TIME_LIMIT, 503 no worker); its result
          // keeps that error for later fetches.
          const { status } = fate;
          await this.sink.end(queryId, { kind: 'error', status });
          await this.lifecycle.transition({ queryId, owner }, finalState(status), { status });
          return { kind: 'error', status };
        }
        default: {
          // Its worker died, or its job ended without a last record: failed, its bytes given back.
          const { status } = fate;
          await this.lifecycle.transition({ queryId, owner }, 'failed', { status });
          await this.failKept(queryId, status);
          return { kind: 'end', status, bytes: Buffer.alloc(0), abort: true };
        }
      }
    };
  }
}

/** The body from its first record on; a result that cannot end well is aborted. */
async function* bodyOf(reader: ResultReader, first: ResultRecord): AsyncGenerator<Buffer> {
  try {
    for (let record = first; ; record = await reader.next()) {
      if (record.kind === 'error') throw new Error(`query failed: ${record.status.reason}`);
      if (record.bytes.length > 0) yield record.bytes;
      if (record.kind === 'end') {
        if (record.abort) throw new Error(`query failed mid-stream: ${record.status.reason}`);
        return;
      }
    }
  } finally {
    await reader.close();
  }
}

/**
 * The length of a finished query's kept result, read record by record; or the status it failed
 * with (an error, or an end that cuts the body short).
 */
async function lengthOf(reader: ResultReader): Promise<number | { failed: Status }> {
  let length = 0;
  for (;;) {
    const record = await reader.next();
    if (record.kind === 'error') return { failed: record.status };
    if (record.kind === 'end' && record.abort) return { failed: record.status };
    length += bodyBytesOf(record);
    if (record.kind === 'end') return length;
  }
}

/**
 * A finished query's kept result, from where its reader starts (it skips what comes before). One
 * that fails now (dropped meanwhile, say) is aborted: its Content-Length promised more.
 */
export async function* bytesOf(reader: ResultReader): AsyncGenerator<Buffer> {
  try {
    for (;;) {
      const record = await reader.next();
      if (record.kind === 'error') throw new Error(`result failed: ${record.status.reason}`);
      if (record.bytes.length > 0) yield record.bytes;
      if (record.kind === 'end') {
        if (record.abort) throw new Error(`result cut short: ${record.status.reason}`);
        return;
      }
    }
  } finally {
    await reader.close();
  }
}

/** A failure of the spool as the client is told it: what is lost (410), or what to retry (503). */
function spoolError(queryId: string, err: unknown): unknown {
  if (err instanceof SpoolMissingError) {
    return new SluiceError(
      'RESULT_GONE',
      `a segment of the result of query ${queryId} is missing from the store that keeps results, or is not whole: the result is lost; run the query again`,
    );
  }
  if (err instanceof SpoolUnavailableError) {
    return new SluiceError(
      'UNAVAILABLE',
      'the store that keeps results (SLUICE_SPOOL_URL) cannot be read now; retry later',
      undefined,
      { 'Retry-After': '5' },
    );
  }
  return err;
}
