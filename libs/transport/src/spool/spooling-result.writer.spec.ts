import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ResultRecord, okStatus, statusOf } from '@app/contracts';
import { ProducerStoppedError, ResultWriter, StopReason } from '../result.channel';
import { FileResultSpool } from './file-result.spool';
import { SpoolUnavailableError, UnconfiguredSpool } from './result.spool';
import { SpoolingResultWriter } from './spooling-result.writer';

/** The channel behind: what reaches it, in order. */
class RecordingWriter implements ResultWriter {
  readonly endRecorded = false;
  readonly records: ResultRecord[] = [];
  write(record: ResultRecord): Promise<void> {
    this.records.push(record);
    return Promise.resolve();
  }
  writeFinal(records: ResultRecord[]): Promise<void> {
    this.records.push(...records);
    return Promise.resolve();
  }
  watch(): () => void {
    return () => undefined;
  }
  interrupt(_reason: StopReason): void {
    // Nothing waits here.
  }
}

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'spooling-spec-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

async function bodyOf(spool: FileResultSpool, records: ResultRecord[]): Promise<Buffer> {
  const parts: Buffer[] = [];
  for (const record of records) {
    if (record.kind !== 'data' || !record.segment) continue;
    for await (const part of await spool.read(record.segment.key)) parts.push(part as Buffer);
  }
  return Buffer.concat(parts);
}

const data = (text: string, rows = 1): ResultRecord => ({
  kind: 'data',
  rows,
  bytes: Buffer.from(text),
});

describe(SpoolingResultWriter.name, () => {
  it('writes the body to segments of the size asked, and only their list to the channel', async () => {
    const spool = new FileResultSpool(dir);
    const inner = new RecordingWriter();
    const writer = new SpoolingResultWriter(inner, spool, 'q1', {
      segmentBytes: 10,
      sealMs: 60_000,
    });
    await writer.write({
      kind: 'head',
      columns: [{ name: 'a', type: 'text' }],
      bytes: Buffer.from('['),
    });
    for (let i = 0; i < 7; i++) await writer.write(data(`"row-${i}",`, 1));
    await writer.writeFinal([
      { kind: 'end', status: okStatus(), bytes: Buffer.from(']'), rows: 7 },
    ]);

    const body = `["row-0","row-1","row-2","row-3","row-4","row-5","row-6",]`;
    expect((await bodyOf(spool, inner.records)).toString()).toBe(body);
    for (const record of inner.records) {
      if (record.kind !== 'error') expect(record.bytes.length).toBe(0);
    }
    expect(inner.records[0]).toMatchObject({ kind: 'head', columns: [{ name: 'a' }] });
    const segments = inner.records.flatMap((r) => (r.kind === 'data' && r.segment ? [r] : []));
    // Each segment is written once it holds 10 bytes or more (a chunk is never split).
    expect(segments.map((s) => s.segment!.size)).toEqual([17, 16, 16, 9]);
    let offset = 0;
    for (const { segment } of segments) {
      expect(segment!.offset).toBe(offset);
      offset += segment!.size;
    }
    expect(segments.reduce((sum, s) => sum + s.rows, 0)).toBe(7);
    expect(inner.records.at(-1)).toMatchObject({ kind: 'end', rows: 7 });
  });

  it("keeps nothing of a record once its write resolved: the caller may write over its bytes (the runner's reuse)", async () => {
    const spool = new FileResultSpool(dir);
    const inner = new RecordingWriter();
    // Segments of 150 kB: the first record waits in the segment being filled, the second seals it.
    const writer = new SpoolingResultWriter(inner, spool, 'q-reuse', {
      segmentBytes: 150_000,
      sealMs: 60_000,
    });
    const written = [100_000, 100_000, 30_000].map((size, i) => Buffer.alloc(size, 0x61 + i));
    for (const bytes of written) {
      const chunk = Buffer.from(bytes);
      await writer.write({ kind: 'data', rows: 1, bytes: chunk });
      chunk.fill(0x7a);
    }
    await writer.writeFinal([{ kind: 'end', status: okStatus(), bytes: Buffer.alloc(0), rows: 3 }]);
    expect((await bodyOf(spool, inner.records)).equals(Buffer.concat(written))).toBe(true);
  });

  it('writes a segment holding bytes once it has waited sealMs, so that a running fetch sees them', async () => {
    const spool = new FileResultSpool(dir);
    const inner = new RecordingWriter();
    let now = 1000;
    const writer = new SpoolingResultWriter(
      inner,
      spool,
      'q2',
      { segmentBytes: 1 << 20, sealMs: 500 },
      () => now,
    );
    await writer.write(data('a'));
    expect(inner.records).toHaveLength(0);
    now += 499;
    await writer.write(data('b'));
    expect(inner.records).toHaveLength(0);
    now += 1;
    await writer.write(data('c'));
    expect(inner.records).toHaveLength(1);
    expect((await bodyOf(spool, inner.records)).toString()).toBe('abc');
  });

  it('deletes the segments of a result that fails, and passes on its error alone', async () => {
    const spool = new FileResultSpool(dir);
    const inner = new RecordingWriter();
    const writer = new SpoolingResultWriter(inner, spool, 'q3', {
      segmentBytes: 4,
      sealMs: 60_000,
    });
    for (let i = 0; i < 3; i++) await writer.write(data('12345'));
    const listed = async () => {
      const keys: string[] = [];
      for await (const entry of spool.list()) keys.push(entry.key);
      return keys;
    };
    expect(await listed()).toHaveLength(3);
    const error: ResultRecord = { kind: 'error', status: statusOf('RESULT_TOO_LARGE') };
    await writer.writeFinal([error]);
    expect(await listed()).toEqual([]);
    expect(inner.records.at(-1)).toEqual(error);
  });

  it('fails a write with SpoolUnavailableError when the store refuses the segment', async () => {
    const inner = new RecordingWriter();
    const writer = new SpoolingResultWriter(inner, new UnconfiguredSpool(), 'q4', {
      segmentBytes: 1,
      sealMs: 60_000,
    });
    await expect(writer.write(data('x'))).rejects.toBeInstanceOf(SpoolUnavailableError);
    await expect(writer.write(data('x'))).rejects.toThrow('SLUICE_SPOOL_URL');
  });

  it('refuses the next write once interrupted, as any writer does', async () => {
    const writer = new SpoolingResultWriter(new RecordingWriter(), new FileResultSpool(dir), 'q5', {
      segmentBytes: 1 << 20,
      sealMs: 60_000,
    });
    writer.interrupt('cancelled');
    await expect(writer.write(data('x'))).rejects.toBeInstanceOf(ProducerStoppedError);
  });
});
