import { IncomingMessage, request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { login, nextBaseUrl } from './client';

/** Opens POST /v1/execute and hands back the response before its body is read. */
export async function open(
  body: unknown,
  headers: Record<string, string> = {},
  token?: string,
): Promise<IncomingMessage> {
  const url = new URL('/v1/execute', nextBaseUrl());
  token ??= await login();
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, ...headers },
    });
    req.on('response', resolve);
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

/** Reads a response body whole; rejects when the connection is cut before it ends. */
export function readAll(res: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () =>
      res.complete ? resolve(Buffer.concat(chunks)) : reject(new Error('response cut short')),
    );
    res.on('aborted', () => reject(new Error('response aborted')));
    res.on('error', reject);
    res.on('close', () => {
      if (!res.complete) reject(new Error('response cut short'));
    });
  });
}

/** Resolves when `predicate` holds for the bytes read so far; the time it took in ms. */
export function readUntil(
  res: IncomingMessage,
  predicate: (soFar: Buffer) => boolean,
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const onData = (c: Buffer) => {
      chunks.push(c);
      const soFar = Buffer.concat(chunks);
      if (predicate(soFar)) {
        res.off('data', onData);
        res.pause();
        resolve(soFar);
      }
    };
    res.on('data', onData);
    res.on('error', reject);
    res.on('end', () => reject(new Error('ended before the condition held')));
  });
}

/** A raw HTTP/1.1 answer: status, head (as received) and body (chunked bodies decoded). */
export interface RawAnswer {
  status: number;
  head: string;
  body: string;
  json: any;
}

function unchunk(body: string): string {
  let out = '';
  let rest = body;
  for (;;) {
    const eol = rest.indexOf('\r\n');
    const size = parseInt(rest.slice(0, eol), 16);
    if (!size) return out;
    out += rest.slice(eol + 2, eol + 2 + size);
    rest = rest.slice(eol + 2 + size + 2);
  }
}

/**
 * Sends a request exactly as written — header lines repeated as given, which fetch() would join
 * — and reads the answer until the server closes (send `Connection: close`).
 */
export function rawExchange(baseUrl: string, text: string): Promise<RawAnswer> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => socket.destroy(new Error('no answer in 10 s')), 10_000);
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    socket.on('close', () => {
      clearTimeout(timer);
      const all = Buffer.concat(chunks).toString('utf8');
      const split = all.indexOf('\r\n\r\n');
      const head = split < 0 ? all : all.slice(0, split);
      let body = split < 0 ? '' : all.slice(split + 4);
      if (/^transfer-encoding: chunked/im.test(head)) body = unchunk(body);
      let json: unknown;
      try {
        json = JSON.parse(body);
      } catch {
        json = undefined;
      }
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0), head, body, json });
    });
    socket.write(text);
  });
}

/** A request's text: the request line, `Host` and `Connection: close`, the lines, the body. */
export function rawRequestText(
  requestLine: string,
  headerLines: string[],
  body = '',
  host = '127.0.0.1',
): string {
  const lines = [requestLine, `Host: ${host}`, 'Connection: close', ...headerLines];
  if (body !== '' && !headerLines.some((l) => /^content-length:/i.test(l))) {
    lines.push(`Content-Length: ${Buffer.byteLength(body)}`);
  }
  return [...lines, '', body].join('\r\n');
}
