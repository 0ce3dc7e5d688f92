import { Parser } from 'pg-protocol/dist/parser';

/** The type bytes of DataRow ('D'), ErrorResponse ('E') and NoticeResponse ('N'). */
const DATA_ROW = 0x44;
const ERROR_RESPONSE = 0x45;
const NOTICE_RESPONSE = 0x4e;
const EMPTY = Buffer.alloc(0);
const NUL = Buffer.alloc(1);
/** Where a field of an error or notice too long to be read is cut (`RAISE '%', repeat(…)`). */
const MAX_MESSAGE_FIELD_BYTES = 64 * 1024;
const CUT = Buffer.from(' …');
const OVERSIZED = Symbol('oversized');

interface ParserInternals {
  reader: { setBuffer(offset: number, buffer: Buffer): void };
  handlePacket: (
    this: ParserInternals,
    offset: number,
    code: number,
    length: number,
    bytes: Buffer,
  ) => unknown;
}

/** The longest string V8 makes (0x1fffffe8 UTF-16 code units): a longer value cannot be read. */
export const MAX_VALUE_CHARS = 0x1fffffe8;

/** Node's error for a buffer decoded past V8's longest string, or V8's for one built past it. */
export function isStringTooLong(err: unknown): boolean {
  return (
    (err as { code?: unknown } | null)?.code === 'ERR_STRING_TOO_LONG' ||
    (err instanceof RangeError && err.message === 'Invalid string length')
  );
}

let installed = false;

/**
 * Makes pg's protocol parser take messages holding a text too long for a JavaScript string instead
 * of throwing: a DataRow becomes a row marked oversized (see isOversizedRow), and an ErrorResponse
 * or NoticeResponse is read with each field that long cut to its first 64 KiB.
 *
 * The parser runs in the socket's 'data' listener: its throw would be uncaught and end the
 * worker thread, and every statement running on it. Either way the message is consumed whole,
 * which keeps the connection in step with the server, and the cursor that reads a marked row
 * fails its statement alone. pg-protocol has no hook for this, so this wraps its Parser's
 * handlePacket: oversized-value.guard.spec.ts fails when that changes. Idempotent.
 */
export function guardOversizedValues(): void {
  if (installed) return;
  installed = true;
  const proto = Parser.prototype as unknown as ParserInternals;
  const handlePacket = proto.handlePacket;
  proto.handlePacket = function (this: ParserInternals, offset, code, length, bytes) {
    try {
      return handlePacket.call(this, offset, code, length, bytes);
    } catch (err) {
      if (!isStringTooLong(err)) throw err;
      if (code === ERROR_RESPONSE || code === NOTICE_RESPONSE) {
        const body = cutFields(bytes.subarray(offset, offset + length - 4));
        return handlePacket.call(this, 0, code, body.length + 4, body);
      }
      if (code !== DATA_ROW) throw err;
      // The reader would otherwise hold the message's bytes until the next one.
      this.reader.setBuffer(0, EMPTY);
      return oversizedRow(length);
    }
  };
}

/** An error or notice's fields (a type byte, then text up to a NUL, each), long ones cut. */
function cutFields(body: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  while (at < body.length && body[at] !== 0) {
    const nul = body.indexOf(0, at + 1);
    const end = nul < 0 ? body.length : nul;
    const text = body.subarray(at + 1, end);
    parts.push(body.subarray(at, at + 1));
    if (text.length > MAX_MESSAGE_FIELD_BYTES) {
      parts.push(text.subarray(0, MAX_MESSAGE_FIELD_BYTES), CUT);
    } else {
      parts.push(text);
    }
    parts.push(NUL);
    at = end + 1;
  }
  parts.push(NUL);
  return Buffer.concat(parts);
}

/** What guardOversizedValues puts in place of a DataRow of `length` bytes with a value too long. */
export function oversizedRow(length: number): object {
  return { name: 'dataRow', length, fieldCount: 0, fields: [], [OVERSIZED]: true };
}

/** True for the DataRow that guardOversizedValues put in place of one holding a value too long. */
export function isOversizedRow(msg: unknown): boolean {
  return (msg as { [OVERSIZED]?: boolean } | null)?.[OVERSIZED] === true;
}
