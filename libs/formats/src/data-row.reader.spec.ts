import { DataRowReader } from './data-row.reader';
import { RowBatch, TextRow, VALUE_GAP } from './row.batch';

/** A DataRow message's body, as PostgreSQL sends it: field count, then length and bytes each. */
function body(row: TextRow): Buffer {
  const parts: Buffer[] = [Buffer.alloc(2)];
  parts[0].writeInt16BE(row.length);
  for (const value of row) {
    const length = Buffer.alloc(4);
    if (value === null) {
      length.writeInt32BE(-1);
      parts.push(length);
    } else {
      const bytes = Buffer.from(value, 'utf8');
      length.writeInt32BE(bytes.length);
      parts.push(length, bytes);
    }
  }
  return Buffer.concat(parts);
}

const ROWS: TextRow[] = [
  ['1', 'plain', null],
  ['', 'unicode é 中 😀', 'x'.repeat(70_000)],
  [null, null, null],
  ['-2', 'a"b\\c\n', '{"j": 1}'],
];

describe(DataRowReader.name, () => {
  it('reads rows from the messages they came in, each copied once, and starts afresh', () => {
    const reader = new DataRowReader();
    // Each body at an offset inside a larger buffer, as pg's parser hands it over.
    for (const row of ROWS) {
      const message = Buffer.concat([Buffer.from('Dxxxx'), body(row), Buffer.from('Z')]);
      reader.add(message, 5, message.length - 1);
      message.fill(0); // the parser reuses its buffer
    }
    expect(reader.length).toBe(ROWS.length);
    const batch = reader.take();
    expect(batch).toMatchObject({ length: ROWS.length, columns: 3 });
    expect(batch.utf8).toBe(true);
    expect(batch.text()).toEqual(ROWS);
    expect(reader.length).toBe(0);
    expect(reader.take()).toBe(RowBatch.EMPTY);
    reader.add(body(['7', 'b', 'c']), 0, body(['7', 'b', 'c']).length);
    expect(reader.take().text()).toEqual([['7', 'b', 'c']]);
  });

  it("fills a batch's buffers again only after the next take", () => {
    const reader = new DataRowReader();
    const take = (row: TextRow) => {
      const b = body(row);
      reader.add(b, 0, b.length);
      return reader.take();
    };
    const first = take(['1', 'one']);
    const second = take(['2', 'two']);
    expect(first.text()).toEqual([['1', 'one']]);
    const third = take(['3', 'three']);
    expect(third.bytes.buffer).toBe(first.bytes.buffer);
    expect(third.bytes.byteOffset).toBe(first.bytes.byteOffset);
    expect(second.text()).toEqual([['2', 'two']]);
    expect(third.text()).toEqual([['3', 'three']]);
  });

  it('makes memory for a batch only once its rows come, and a small one in the shared pool', () => {
    const b = body(['1', 'one']);
    const allocations = jest.spyOn(Buffer, 'allocUnsafe');
    try {
      const reader = new DataRowReader();
      // A statement's rows all come in its first read: nothing is made for a next read.
      expect(allocations).not.toHaveBeenCalled();
      reader.add(b, 0, b.length);
      const batch = reader.take();
      expect(allocations).toHaveBeenCalledTimes(1);
      expect(reader.take()).toBe(RowBatch.EMPTY);
      expect(allocations).toHaveBeenCalledTimes(1);
      // A slice of Node's shared pool, not memory of its own for V8 to account for and collect.
      expect(batch.bytes.buffer.byteLength).toBe(Buffer.poolSize);
      expect(batch.starts.buffer.byteLength).toBeLessThanOrEqual(64);
      expect(batch.text()).toEqual([['1', 'one']]);
    } finally {
      allocations.mockRestore();
    }
  });

  it('grows a batch from its first row to many wide ones, and sizes the next after it', () => {
    const reader = new DataRowReader();
    const rows: TextRow[] = Array.from({ length: 3000 }, (_, i) => [String(i), 'w'.repeat(i % 97)]);
    for (const row of rows) {
      const b = body(row);
      reader.add(b, 0, b.length);
    }
    const first = reader.take();
    expect(first.text()).toEqual(rows);
    const b = body(['x', 'y']);
    reader.add(b, 0, b.length);
    const second = reader.take();
    expect(second.text()).toEqual([['x', 'y']]);
    // As large as the batch before: a large result's next read grows no more.
    expect(second.bytes.buffer.byteLength).toBeGreaterThanOrEqual(first.bytes.length);
    expect(second.starts.buffer.byteLength).toBeGreaterThanOrEqual(first.starts.byteLength);
  });

  it('copies rows that follow each other in their buffer together, at a flush or a take', () => {
    // Whole messages back to back, as a socket read brings them: header, then body.
    const message = (row: TextRow) => {
      const b = body(row);
      const header = Buffer.from('D\0\0\0\0', 'latin1');
      header.writeInt32BE(b.length + 4, 1);
      return Buffer.concat([header, b]);
    };
    const read = (rows: TextRow[]) => {
      const parts = rows.map(message);
      const bytes = Buffer.concat([Buffer.from('xx'), ...parts, Buffer.from('Z')]);
      const bodies: [number, number][] = [];
      let at = 2;
      for (const part of parts) {
        bodies.push([at + 5, at + part.length]);
        at += part.length;
      }
      return { bytes, bodies };
    };
    const reader = new DataRowReader();
    const first = read(ROWS);
    for (const [from, to] of first.bodies) reader.addLater(first.bytes, from, to);
    // Nothing copied yet: the rows are still the parser's.
    expect(reader.length).toBe(0);
    reader.flush();
    expect(reader.length).toBe(ROWS.length);
    first.bytes.fill(0); // the parser reuses its buffer
    // A row taken at once between two runs, and a run whose rows are not all adjacent.
    const one = body(['5', 'five', null]);
    reader.add(one, 0, one.length);
    const second = read([
      ['6', 'six', 'x'],
      ['7', 'seven', 'y'],
      ['8', 'eight', 'z'],
    ]);
    reader.addLater(second.bytes, ...second.bodies[0]);
    reader.addLater(second.bytes, ...second.bodies[2]);
    const third = read([['9', 'nine', '']]);
    reader.addLater(third.bytes, ...third.bodies[0]);
    const batch = reader.take();
    expect(batch.text()).toEqual([
      ...ROWS,
      ['5', 'five', null],
      ['6', 'six', 'x'],
      ['8', 'eight', 'z'],
      ['9', 'nine', ''],
    ]);
    // Between values, headers and lengths alike, only the gap byte.
    const values = batch.starts.length;
    let gaps = 0;
    for (let k = 0, at = 0; k < values; k++) {
      for (; at < batch.starts[k]; at++, gaps++) expect(batch.bytes[at]).toBe(VALUE_GAP);
      at = batch.ends[k] < 0 ? batch.starts[k] : batch.ends[k];
    }
    expect(gaps).toBeGreaterThan(0);
  });

  it('reads rows of no columns', () => {
    const reader = new DataRowReader();
    reader.add(body([]), 0, 2);
    reader.add(body([]), 0, 2);
    expect(reader.take().text()).toEqual([[], []]);
  });
});

describe(RowBatch.name, () => {
  it('gives the texts it was made of, ASCII or not', () => {
    const ascii: TextRow[] = [
      ['a', null],
      ['', 'bcdefghijklmnopqrstuvwxyz'],
    ];
    expect(RowBatch.fromText(ascii).text()).toEqual(ascii);
    expect(RowBatch.fromText(ROWS).text()).toEqual(ROWS);
    expect(RowBatch.fromText([]).length).toBe(0);
  });

  it('slices rows off a batch, sharing its bytes', () => {
    const batch = RowBatch.fromText(ROWS);
    for (let from = 0; from <= ROWS.length; from++) {
      for (let to = from; to <= ROWS.length + 1; to++) {
        const slice = batch.slice(from, to);
        expect(slice.text()).toEqual(ROWS.slice(from, to));
        expect(slice.utf8).toBe(true);
        if (slice.length > 0) expect(slice.bytes).toBe(batch.bytes);
      }
    }
    expect(RowBatch.fromText([[], [], []]).slice(1, 3).text()).toEqual([[], []]);
  });

  it('tells when a value is not well-formed UTF-8 (a SQL_ASCII database)', () => {
    const reader = new DataRowReader();
    const row = body(['ok', 'x']);
    row[row.length - 1] = 0xff;
    reader.add(row, 0, row.length);
    const batch = reader.take();
    expect(batch.utf8).toBe(false);
    expect(batch.text()).toEqual([['ok', '\ufffd']]);
    expect(RowBatch.fromText(ROWS).utf8).toBe(true);
  });
});
