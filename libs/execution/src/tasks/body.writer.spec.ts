import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { ExecuteJobData, ResultRecord, okStatus, statusOf } from '@app/contracts';
import { ProducerStoppedError, ResultWriter } from '@app/transport';
import { BodyWriter } from './body.writer';

/** Records what a BodyWriter hands to the channel, and in how many round trips. */
class RecordingWriter implements ResultWriter {
  readonly endRecorded = false;
  readonly records: ResultRecord[] = [];
  trips = 0;
  /** Refuses every record but a final one from then on, as a writer does once cancelled. */
  refusing: Error | undefined;
  write(record: ResultRecord): Promise<void> {
    if (this.refusing && record.kind !== 'end' && record.kind !== 'error') {
      return Promise.reject(this.refusing);
    }
    this.trips += 1;
    this.records.push(record);
    return Promise.resolve();
  }
  writeFinal(records: ResultRecord[]): Promise<void> {
    this.trips += 1;
    this.records.push(...records);
    return Promise.resolve();
  }
  watch(): () => void {
    return () => undefined;
  }
  interrupt(): void {}
}

const job = (encoding?: ExecuteJobData['encoding']) => ({ encoding }) as ExecuteJobData;
const bytesOf = (records: ResultRecord[]) =>
  Buffer.concat(records.map((r) => (r.kind === 'error' ? Buffer.alloc(0) : r.bytes)));

describe(BodyWriter.name, () => {
  it('splits chunks so that no entry exceeds the cap, keeping the row count on the first piece', async () => {
    const out = new RecordingWriter();
    const body = new BodyWriter(out, job(), 4);
    await body.head([{ name: 'a', type: 'text' }], Buffer.from('0123456789'));
    await body.data(7, Buffer.from('abcdefghij'));
    await body.end(okStatus(), Buffer.from('xyz12'));
    expect(out.records.every((r) => r.kind === 'error' || r.bytes.length <= 4)).toBe(true);
    expect(bytesOf(out.records).toString()).toBe('0123456789abcdefghijxyz12');
    expect(
      out.records.filter((r) => r.kind === 'data').map((r) => (r.kind === 'data' ? r.rows : -1)),
    ).toEqual([0, 0, 7, 0, 0, 0]);
    expect(out.records[out.records.length - 1].kind).toBe('end');
    expect(body.bytes).toBe(25);
    expect(body.encodedBytes).toBe(25);
  });

  it('sends a small result in one round trip once it knows the first batch is the last', async () => {
    const out = new RecordingWriter();
    const body = new BodyWriter(out, job(), 1024);
    body.holdUntilEnd();
    await body.head([], Buffer.from('{'));
    await body.data(1, Buffer.from('[1]'));
    await body.end(okStatus(), Buffer.from('}'));
    expect(out.trips).toBe(1);
    // One record: the whole body, its rows and its status.
    expect(out.records).toEqual([
      {
        kind: 'end',
        status: okStatus(),
        bytes: Buffer.from('{[1]}'),
        rows: 1,
        startedAt: expect.any(Number),
        streamingAt: expect.any(Number),
      },
    ]);
  });

  it('tells in its end when the first of the result came to be written, fixed then', async () => {
    jest.useFakeTimers({ now: 1_000 });
    try {
      const out = new RecordingWriter();
      const body = new BodyWriter(out, job(), 1024);
      jest.setSystemTime(1_250);
      await body.head([{ name: 'a', type: 'text' }], Buffer.from('{'));
      jest.setSystemTime(1_400);
      await body.data(1, Buffer.from('[1]'));
      expect(body.streamingAt).toBe(1_250);
      jest.setSystemTime(1_900);
      await body.end(okStatus(), Buffer.from('}'));
      expect(out.records.at(-1)).toMatchObject({
        kind: 'end',
        startedAt: 1_000,
        streamingAt: 1_250,
      });
    } finally {
      jest.useRealTimers();
    }
  });

  it('tells no streaming time when nothing of the result was written', async () => {
    const out = new RecordingWriter();
    const body = new BodyWriter(out, job(), 1024);
    await body.fail(statusOf('SYNTAX_ERROR'));
    expect(body.streamingAt).toBeUndefined();
    expect(out.records).toEqual([
      { kind: 'error', status: statusOf('SYNTAX_ERROR'), startedAt: expect.any(Number) },
    ]);
  });

  it('tells in its final record, end or error, when the statement began', async () => {
    const before = Date.now();
    for (const ending of ['end', 'error'] as const) {
      const out = new RecordingWriter();
      const body = new BodyWriter(out, job(), 1024);
      if (ending === 'end') await body.end(okStatus(), Buffer.from('[]'));
      else await body.fail(statusOf('SYNTAX_ERROR'));
      const last = out.records[out.records.length - 1];
      expect(last.kind).toBe(ending);
      expect(last.kind !== 'head' && last.kind !== 'data' && last.startedAt).toBeGreaterThanOrEqual(
        before,
      );
    }
  });

  it('keeps a held result in its records when the whole would not fit in one entry', async () => {
    const out = new RecordingWriter();
    const body = new BodyWriter(out, job(), 4);
    body.holdUntilEnd();
    await body.head([], Buffer.from('{'));
    await body.data(1, Buffer.from('[1]'));
    await body.end(okStatus(), Buffer.from('}'));
    expect(out.trips).toBe(1);
    expect(out.records.map((r) => r.kind)).toEqual(['head', 'data', 'end']);
  });

  it('compresses the whole body, flushed chunk by chunk', async () => {
    const out = new RecordingWriter();
    const body = new BodyWriter(out, job({ name: 'gzip', level: 6 }), 1 << 20);
    await body.head([], Buffer.from('head,'));
    await body.data(1, Buffer.from('rows,'));
    await body.end(okStatus(), Buffer.from('end'));
    expect(gunzipSync(bytesOf(out.records)).toString()).toBe('head,rows,end');
    // What was written, and what the encoder made.
    expect(body.bytes).toBe(bytesOf(out.records).length);
    expect(body.encodedBytes).toBe('head,rows,end'.length);
  });

  it('holds a compressed head until the first rows, yet counts the body as started', async () => {
    const out = new RecordingWriter();
    const body = new BodyWriter(out, job({ name: 'br', level: 9 }), 1 << 20);
    await body.head([], Buffer.from('{"data":['));
    expect(bytesOf(out.records).length).toBe(0);
    expect(body.started).toBe(true);
    await body.end({ reason: 'boom', sql_state: '22012', vendor_code: -520 }, Buffer.from(']}'));
    expect(brotliDecompressSync(bytesOf(out.records)).toString()).toBe('{"data":[]}');
  });

  it('has not started while it has sent no byte, so that a failure gets the envelope', async () => {
    const out = new RecordingWriter();
    const body = new BodyWriter(out, job({ name: 'gzip', level: 6 }), 1024);
    await body.head([], Buffer.alloc(0));
    expect(body.started).toBe(false);
    await body.fail({ reason: 'boom', sql_state: '22012', vendor_code: -520 });
    expect(out.records[out.records.length - 1]).toEqual({
      kind: 'error',
      status: { reason: 'boom', sql_state: '22012', vendor_code: -520 },
      startedAt: expect.any(Number),
    });
  });

  describe('a stop that refuses a write of the body', () => {
    const cancelled = new ProducerStoppedError('cancelled');
    const status = statusOf('CANCELLED', 'query cancelled');

    it('sends the compressed chunk it refused with the final status, so that the body still decodes', async () => {
      for (const encoding of [
        { name: 'gzip', level: 6 },
        { name: 'br', level: 5 },
      ] as const) {
        const out = new RecordingWriter();
        const body = new BodyWriter(out, job(encoding), 1 << 20);
        await body.head([], Buffer.from('{"data":['));
        await body.data(1, Buffer.from('[1]'));
        out.refusing = cancelled;
        await expect(body.data(1, Buffer.from(',[2]'))).rejects.toBe(cancelled);
        await body.end(status, Buffer.from('],"status":"cancelled"}'));
        const decode = encoding.name === 'gzip' ? gunzipSync : brotliDecompressSync;
        expect(decode(bytesOf(out.records)).toString()).toBe(
          '{"data":[[1],[2]],"status":"cancelled"}',
        );
        expect(out.records[out.records.length - 1]).toMatchObject({ kind: 'end', status });
      }
    });

    it('sends the rest of a chunk split over entries, so that the body never ends mid-row', async () => {
      const out = new RecordingWriter();
      const body = new BodyWriter(out, job(), 8);
      await body.head([], Buffer.from('['));
      const write = jest.spyOn(out, 'write');
      // The second piece of the chunk is refused.
      write.mockImplementationOnce(RecordingWriter.prototype.write.bind(out));
      write.mockImplementationOnce(() => Promise.reject(cancelled));
      await expect(body.data(2, Buffer.from('[1111],[2222]'))).rejects.toBe(cancelled);
      write.mockRestore();
      await body.end(status, Buffer.from(']'));
      expect(bytesOf(out.records).toString()).toBe('[[1111],[2222]]');
      expect(out.records.every((r) => r.kind === 'error' || r.bytes.length <= 8)).toBe(true);
    });

    it('cuts the body (abort) when what is left is more than one entry holds', async () => {
      const out = new RecordingWriter();
      const body = new BodyWriter(out, job(), 8);
      await body.head([], Buffer.from('['));
      out.refusing = cancelled;
      await expect(body.data(2, Buffer.from('[1111],[2222]'))).rejects.toBe(cancelled);
      await body.end(status, Buffer.from(']'));
      expect(out.records[out.records.length - 1]).toMatchObject({
        kind: 'end',
        status,
        abort: true,
        bytes: Buffer.alloc(0),
      });
    });

    it('sends nothing again after a failure that is not a refusal (the channel itself failed)', async () => {
      const out = new RecordingWriter();
      const body = new BodyWriter(out, job(), 1024);
      await body.head([], Buffer.from('['));
      out.refusing = new Error('stream lost');
      await expect(body.data(1, Buffer.from('[1]'))).rejects.toThrow('stream lost');
      await body.end(status, Buffer.from(']'));
      expect(bytesOf(out.records).toString()).toBe('[]');
    });
  });
});
