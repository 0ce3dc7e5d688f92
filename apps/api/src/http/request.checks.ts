import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Socket } from 'node:net';
import { Transform, TransformCallback } from 'node:stream';
import { ERROR_CATALOGUE, ErrorCode, SluiceError } from '@app/contracts';
import { toEnvelope } from './error.envelope';

/**
 * Bytes of each body that the budget does not count: most statements fit, so that clients
 * holding the whole budget with slow large bodies keep out only other large bodies, not every
 * request (they still hold this much per connection).
 */
export const UNCOUNTED_BYTES = 64 * 1024;

/**
 * The bytes of request bodies being received, every request's together (past each body's first
 * UNCOUNTED_BYTES), and the most there may be (SLUICE_MAX_RECEIVING_BYTES). Each request's body
 * may be up to SLUICE_MAX_BODY_BYTES and take up to SLUICE_REQUEST_TIMEOUT_MS to arrive: without a
 * bound over all of them, a client (no login needed) that opened many connections and sent each
 * body slowly held that much of the api's memory per connection.
 */
export class ReceivingBudget {
  private held = 0;

  constructor(readonly most: number) {}

  /** Takes `n` bytes; false, taking none, when they would go past the most. */
  take(n: number): boolean {
    if (this.held + n > this.most) return false;
    this.held += n;
    return true;
  }

  give(n: number): void {
    this.held -= n;
  }
}

const receivingFull = () =>
  new SluiceError(
    'UNAVAILABLE',
    'the api is receiving as many request bytes as it may hold at once (SLUICE_MAX_RECEIVING_BYTES); retry',
    undefined,
    { 'retry-after': '1' },
  );

/**
 * Checks a request body as it streams in, before any parser sees it: it must be valid UTF-8
 * (a decoder would otherwise swap bad bytes for U+FFFD and run a statement nobody sent). What has
 * arrived past its first UNCOUNTED_BYTES counts against `budget` until the body has all arrived
 * or failed. The JSON text itself is checked whole, before parsing (request.input.ts).
 */
export class BodyCheck extends Transform {
  private readonly decoder = new TextDecoder('utf-8', { fatal: true });
  /** Bytes of this body taken from the budget. */
  private taken = 0;
  /** Bytes of this body that have arrived. */
  private arrived = 0;

  constructor(private readonly budget?: ReceivingBudget) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    const counted = Math.min(chunk.length, this.arrived + chunk.length - UNCOUNTED_BYTES);
    this.arrived += chunk.length;
    if (this.budget && counted > 0) {
      if (!this.budget.take(counted)) {
        callback(receivingFull());
        return;
      }
      this.taken += counted;
    }
    try {
      this.decoder.decode(chunk, { stream: true });
    } catch {
      callback(new SluiceError('INVALID_REQUEST', 'request body is not valid UTF-8'));
      return;
    }
    callback(null, chunk);
  }

  override _flush(callback: TransformCallback): void {
    this.giveBack();
    try {
      this.decoder.decode();
    } catch {
      callback(new SluiceError('INVALID_REQUEST', 'request body is not valid UTF-8'));
      return;
    }
    callback();
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    this.giveBack();
    callback(err);
  }

  private giveBack(): void {
    this.budget?.give(this.taken);
    this.taken = 0;
  }
}

/**
 * Header fields a request may carry once. Node keeps the first of two `Authorization`,
 * `Content-Type` or `Host` lines and drops the rest unseen (it refuses a second `Content-Length`
 * itself), so a request could be judged on one value while a proxy or log went by the other.
 */
const SINGLE_FIELDS = new Map(
  ['Authorization', 'Content-Type', 'Content-Length', 'Host'].map((name) => [
    name.toLowerCase(),
    name,
  ]),
);

/** Schemes whose credential is one token68 (RFC 9110 §11.2), never a list. */
const ONE_TOKEN_SCHEMES = new Set(['bearer', 'basic']);
const TOKEN68 = /^[A-Za-z0-9\-._~+/]+=*$/;

/**
 * An `Authorization` value's first word and what follows it, white space around each dropped
 * (undefined where there is none). String.prototype.trim drops what `\s` matches: the same as
 * `/^\s*(\S+)(?:\s+(.+?))?\s*$/s`, whose lazy group a regular expression engine steps through a
 * character at a time, on every request's token.
 */
export function schemeAndCredential(value: string): [string | undefined, string | undefined] {
  const text = value.trim();
  if (text === '') return [undefined, undefined];
  const space = /\s/.exec(text);
  if (!space) return [text, undefined];
  return [text.slice(0, space.index), text.slice(space.index).trimStart()];
}

/**
 * Why an `Authorization` value of a scheme Sluice reads does not hold exactly one credential
 * (`Bearer a, Bearer b` as a proxy joins two headers, or trailing words), or undefined. Parsers
 * downstream take the first token or ignore stray characters, so such a value would pass as the
 * credential in it that happens to be valid. Other schemes, and a scheme with no credential, are
 * left to the guards (401). The reason says what was found, never echoing it: a newcomer whose
 * login failed sends its JSON answer as the token, and must learn that, not that it is "ambiguous".
 */
export function authorizationProblem(value: string): string | undefined {
  const [scheme, credential] = schemeAndCredential(value);
  if (scheme === undefined || !ONE_TOKEN_SCHEMES.has(scheme.toLowerCase())) return undefined;
  // No credential at all is not ambiguous: the guards answer it (401), as a missing token.
  if (credential === undefined || TOKEN68.test(credential)) return undefined;
  const expected = `"${scheme} <credential>"`;
  if (/^[{[<"]/.test(credential)) {
    return `the Authorization header holds ${scheme} followed by text that is not a token (it starts with "${credential[0]}", like a JSON or HTML answer: did the login fail?); it must be ${expected}`;
  }
  if (credential.includes(',')) {
    return `ambiguous request: the Authorization header must hold exactly one credential: ${expected}; it holds a list (a comma after ${scheme})`;
  }
  if (/\s/.test(credential)) {
    return `ambiguous request: the Authorization header must hold exactly one credential: ${expected}; it holds more than one word after ${scheme}`;
  }
  return `the Authorization header holds ${scheme} followed by text that is not a token (a token holds only letters, digits and -._~+/, with = at the end); it must be ${expected}`;
}

/**
 * Why a request's header lines are ambiguous (a field of SINGLE_FIELDS more than once, or an
 * `Authorization` that is not one credential), or undefined. `rawHeaders` as Node gives them:
 * names and values alternating, as received.
 */
export function headerAmbiguity(rawHeaders: readonly string[]): string | undefined {
  const seen = new Set<string>();
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i].toLowerCase();
    const field = SINGLE_FIELDS.get(name);
    if (field === undefined) continue;
    if (seen.has(name)) return `ambiguous request: more than one ${field} header`;
    seen.add(name);
    if (name === 'authorization') {
      const problem = authorizationProblem(rawHeaders[i + 1]);
      if (problem) return problem;
    }
  }
  return undefined;
}

/**
 * Gate (request.gate.ts): a request whose headers are ambiguous is refused (400), before any
 * other check: two credentials, two media types or two hosts, one of them picked silently, is
 * how a request gets judged on one value and acted on by another.
 */
export function ambiguousHeaders(request: FastifyRequest): SluiceError | undefined {
  const problem = headerAmbiguity(request.raw.rawHeaders);
  return problem === undefined ? undefined : new SluiceError('INVALID_REQUEST', problem);
}

/**
 * Why the query string of a request target does not decode (a `%` not followed by two hex
 * digits, or escapes that are not UTF-8), or undefined. Fastify's parser keeps such a value as
 * it came, so `statement=drop+table+t+--%ff` would run as `drop table t --%ff`. The query string
 * is what the router takes: everything after the first `?` or `#`.
 */
export function queryEncodingProblem(url: string): string | undefined {
  const start = url.search(/[?#]/);
  if (start < 0 || !url.includes('%', start)) return undefined;
  try {
    decodeURIComponent(url.slice(start + 1));
    return undefined;
  } catch {
    return 'the query string is not valid percent-encoded UTF-8';
  }
}

/**
 * Gate (request.gate.ts): a request whose query string does not decode is refused (400), before
 * any route or parser reads it: the GET form of execute and the options of text/plain bodies
 * would otherwise take the undecoded text.
 */
export function undecodableQueryString(request: FastifyRequest): SluiceError | undefined {
  const problem = queryEncodingProblem(request.raw.url ?? '');
  return problem === undefined ? undefined : new SluiceError('INVALID_REQUEST', problem);
}

/**
 * Fastify's `frameworkErrors`: errors it raises before routing (a URL that does not decode, a
 * path parameter too long) would otherwise be answered in Fastify's own body, not the envelope.
 */
export function frameworkErrorHandler(
  err: Error,
  _request: FastifyRequest,
  reply: FastifyReply,
): void {
  const { httpStatus, headers, body } = toEnvelope(err);
  void reply.code(httpStatus).headers(headers).type('application/json; charset=utf-8').send(body);
}

const HTTP_REASONS: Record<number, string> = {
  400: 'Bad Request',
  408: 'Request Timeout',
  431: 'Request Header Fields Too Large',
};

/**
 * Fastify's `clientErrorHandler`: requests Node's HTTP parser refuses (bad framing, conflicting
 * Content-Length, oversized headers) get the same envelope as every other error.
 */
export function clientErrorHandler(err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  let http = 400;
  let code: ErrorCode = 'INVALID_REQUEST';
  let reason = 'malformed HTTP request';
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    http = 408;
    reason = 'request timed out';
  } else if (err.code === 'HPE_HEADER_OVERFLOW') {
    http = 431;
    code = 'PAYLOAD_TOO_LARGE';
    reason = 'request headers are too large';
  }
  const entry = ERROR_CATALOGUE[code];
  const body = JSON.stringify({
    status: { reason, sql_state: entry.sqlState, vendor_code: entry.vendorCode },
  });
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${http} ${HTTP_REASONS[http]}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `Content-Type: application/json; charset=utf-8\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}
