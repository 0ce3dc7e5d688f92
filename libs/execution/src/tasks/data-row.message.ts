import { Parser } from 'pg-protocol/dist/parser';
import { MAX_VALUE_CHARS, isStringTooLong } from './oversized-value.guard';
import { ownRemainder } from './read.buffer';

/** The type byte of DataRow ('D'). */
const DATA_ROW = 0x44;
const EMPTY = Buffer.alloc(0);

type HandlePacket = (offset: number, code: number, length: number, bytes: Buffer) => unknown;

/** Where the parser puts a connection's DataRows while one is set (DataRowMessage.sink). */
export interface DataRowSink {
  /**
   * Takes a DataRow whose body is `bytes[from, to)`, as the parser reads it: valid until the
   * parser is handed the socket's next bytes or dispatches a message that is not a row, both of
   * which it announces with flush(). `length` is the message's length field.
   */
  row(bytes: Buffer, from: number, to: number, length: number): void;
  /** The rows taken must be copied now: their buffer is about to change or be dispatched past. */
  flush(): void;
}

/** What handlePacket returns for a DataRow a sink took: parse does not hand it to pg. */
const TAKEN = Object.freeze({ name: 'dataRowTaken' });

/** True when a value of the DataRow body `bytes[from, to)` is too long for a string. */
export function hasOversizedValue(bytes: Buffer, from: number, to: number): boolean {
  // A value of n bytes is at most n characters: only one longer than the limit is tried.
  if (to - from <= MAX_VALUE_CHARS) return false;
  const count = bytes.readInt16BE(from);
  let at = from + 2;
  for (let i = 0; i < count; i++) {
    const length = bytes.readInt32BE(at);
    at += 4;
    if (length > MAX_VALUE_CHARS) {
      try {
        bytes.toString('utf8', at, at + length);
      } catch (err) {
        if (isStringTooLong(err)) return true;
        throw err;
      }
    }
    if (length > 0) at += length;
  }
  return false;
}

/**
 * A DataRow as pg's parser hands it over, its values not read yet: `bytes[from, to)` is its body.
 * The body is valid only while the message is dispatched — pg does that at once, in the socket's
 * listener, and its parser then reuses the buffer. TextCursor copies the body into its batch
 * (DataRowReader), making no string; every other query of pg reads `fields`, the values as
 * pg-protocol decodes them, or none for a row with a value too long for a string.
 */
export class DataRowMessage {
  readonly name = 'dataRow';
  private decoded: (string | null)[] | undefined;
  /**
   * While set, the parser gives this connection's DataRows to it and none as a message: pg's
   * events and its client's dispatch, a tenth of a thread reading a large result, are skipped.
   * Set by the reader of the rows under way after their first one came as a message; it must be
   * cleared at the first message that is not a row (the read's end, an error), which pg hands
   * to that reader, before another query's rows can come.
   */
  sink: DataRowSink | undefined;

  constructor(
    public bytes: Buffer,
    public from: number,
    public to: number,
    /** The message's length field, as pg-protocol gives it. */
    public length: number,
  ) {}

  /** This message made the next DataRow: one object a parser, as each is read when handed over. */
  reuse(bytes: Buffer, from: number, to: number, length: number): this {
    this.bytes = bytes;
    this.from = from;
    this.to = to;
    this.length = length;
    this.decoded = undefined;
    return this;
  }

  /** Lets go of the buffer the row came in (a huge one is not kept until the next row). */
  release(): void {
    this.reuse(EMPTY, 0, 0, this.length);
  }

  get fields(): (string | null)[] {
    return (this.decoded ??= this.oversized ? [] : this.decode());
  }

  /** True when a value is too long for a string: it cannot be had as text. */
  get oversized(): boolean {
    return hasOversizedValue(this.bytes, this.from, this.to);
  }

  private decode(): (string | null)[] {
    const { bytes } = this;
    const count = bytes.readInt16BE(this.from);
    const fields = new Array<string | null>(count);
    let at = this.from + 2;
    for (let i = 0; i < count; i++) {
      const length = bytes.readInt32BE(at);
      at += 4;
      if (length < 0) {
        fields[i] = null;
      } else {
        fields[i] = bytes.toString('utf8', at, at + length);
        at += length;
      }
    }
    return fields;
  }
}

let installed = false;
const MESSAGE = Symbol('dataRow');

type SinkingParser = Parser & { [MESSAGE]?: DataRowMessage };
type Parse = (buffer: Buffer, callback: (message: unknown) => void) => void;

/**
 * Makes pg's protocol parser hand DataRows over as DataRowMessage, their values read only by
 * whoever asks for them, or to the message's sink while one is set, and keep nothing of a read
 * in the thread's shared read buffer once it is handled (ownRemainder). pg-protocol has no hook
 * for this, so this wraps its Parser's handlePacket and parse: data-row.message.spec.ts fails
 * when those change. Idempotent.
 */
export function readDataRowsOnDemand(): void {
  if (installed) return;
  installed = true;
  const proto = Parser.prototype as unknown as { handlePacket: HandlePacket; parse: Parse };
  const handlePacket = proto.handlePacket;
  const parse = proto.parse;
  proto.handlePacket = function (this: SinkingParser, offset, code, length, bytes) {
    if (code !== DATA_ROW) {
      // The sink's rows come before this message, whose handler may take them.
      this[MESSAGE]?.sink?.flush();
      return handlePacket.call(this, offset, code, length, bytes);
    }
    // The length counts itself (4 bytes) and the body.
    const message = (this[MESSAGE] ??= new DataRowMessage(EMPTY, 0, 0, 0));
    if (message.sink) {
      message.sink.row(bytes, offset, offset + length - 4, length);
      return TAKEN;
    }
    return message.reuse(bytes, offset, offset + length - 4, length);
  };
  proto.parse = function (this: SinkingParser, buffer, callback) {
    try {
      // A row the sink took is no message for pg: its connection would emit an event a row.
      parse.call(this, buffer, (message) => {
        if (message !== TAKEN) callback(message);
      });
      // The parser keeps what is left of its buffer, and moves or adds to it with the next bytes.
      this[MESSAGE]?.sink?.flush();
    } finally {
      // Last, and also when a handler threw: the rows flushed above may lie where the remainder
      // is moved to, and nothing of this read may stay in the thread's shared buffer, which the
      // next read (another connection's, another user's) overwrites.
      ownRemainder(this);
    }
  };
}
