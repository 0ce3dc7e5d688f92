import { Parser } from 'pg-protocol/dist/parser';
import { MAX_VALUE_CHARS, isStringTooLong } from './oversized-value.guard';

/** The type byte of DataRow ('D'). */
const DATA_ROW = 0x44;
const EMPTY = Buffer.alloc(0);

type HandlePacket = (offset: number, code: number, length: number, bytes: Buffer) => unknown;

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
    // A value of n bytes is at most n characters: only one longer than the limit is tried.
    if (this.to - this.from <= MAX_VALUE_CHARS) return false;
    const { bytes } = this;
    const count = bytes.readInt16BE(this.from);
    let at = this.from + 2;
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

/**
 * Makes pg's protocol parser hand DataRows over as DataRowMessage, their values read only by
 * whoever asks for them. pg-protocol has no hook for this, so this wraps its Parser's
 * handlePacket: data-row.message.spec.ts fails when that changes. Idempotent.
 */
export function readDataRowsOnDemand(): void {
  if (installed) return;
  installed = true;
  const proto = Parser.prototype as unknown as { handlePacket: HandlePacket };
  const handlePacket = proto.handlePacket;
  proto.handlePacket = function (
    this: Parser & { [MESSAGE]?: DataRowMessage },
    offset,
    code,
    length,
    bytes,
  ) {
    if (code !== DATA_ROW) return handlePacket.call(this, offset, code, length, bytes);
    // The length counts itself (4 bytes) and the body.
    const message = (this[MESSAGE] ??= new DataRowMessage(EMPTY, 0, 0, 0));
    return message.reuse(bytes, offset, offset + length - 4, length);
  };
}
