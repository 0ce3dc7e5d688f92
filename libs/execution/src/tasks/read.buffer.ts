/**
 * The most one read of a statement connection's socket takes: as much as Node's own reads take
 * (four or sixteen times as much read a large result with the same CPU).
 */
export const READ_BUFFER_BYTES = 64 * 1024;

/** What pg-protocol's Parser keeps of its input between two reads (its own fields). */
interface ParserInput {
  buffer: Buffer;
  bufferOffset: number;
  bufferLength: number;
}

const CARRY = Symbol('carry');

type CarryingParser = ParserInput & { [CARRY]?: Buffer };

let shared: Buffer | undefined;

/**
 * The one buffer every statement socket of this thread reads into (see LoginPools): Node's
 * default gives each read a new Buffer, about 180 MB of them for a million-row result, which V8
 * counts toward its next full collection. Sharing it is safe because a read is handed over
 * synchronously and its bytes are copied before the next read can start (ownRemainder).
 */
export function threadReadBuffer(): Buffer {
  return (shared ??= Buffer.allocUnsafeSlow(READ_BUFFER_BYTES));
}

/** A carry larger than this (grown for a message longer than a read) is not kept once empty. */
const KEPT_CARRY_BYTES = 4 * READ_BUFFER_BYTES;

/**
 * Called after the parser handled a read: a message cut by the read's end stays in the parser
 * (pg-protocol keeps it by reference, to join it with the next read), so when it lies in the
 * shared read buffer it is copied into the parser's own carry, which the next read is appended
 * to. The carry has room for a whole read past what it holds, so pg-protocol never allocates to
 * join them. A connection keeps its carry while it is not much larger than a read: a result's
 * reads end now inside a message, now between two, and new memory each time would be new pages
 * for the kernel to fault in.
 */
export function ownRemainder(parser: object): void {
  const input = parser as CarryingParser;
  const left = input.bufferLength;
  if (left === 0) {
    if ((input[CARRY]?.length ?? 0) > KEPT_CARRY_BYTES) input[CARRY] = undefined;
    return;
  }
  const from = input.bufferOffset;
  let carry = input[CARRY];
  if (input.buffer === carry) {
    if (from > 0) carry.copyWithin(0, from, from + left);
  } else if (shared !== undefined && input.buffer.buffer === shared.buffer) {
    if (carry === undefined || carry.length < left + READ_BUFFER_BYTES) {
      // Doubling: a message longer than a read grows the carry a few times, not once a read.
      const size = Math.max(left + READ_BUFFER_BYTES, 2 * (carry?.length ?? 0));
      carry = input[CARRY] = Buffer.allocUnsafeSlow(size);
    }
    input.buffer.copy(carry, 0, from, from + left);
  } else {
    // A buffer of the parser's own (one it grew) or of a socket that reads as Node does.
    return;
  }
  input.buffer = carry;
  input.bufferOffset = 0;
}
