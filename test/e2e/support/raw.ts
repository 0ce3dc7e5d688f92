import { IncomingMessage, request as httpRequest } from 'node:http';
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
