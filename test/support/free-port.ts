import { once } from 'node:events';
import { mkdirSync, openSync, closeSync, statSync, unlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Ports are drawn below Linux's ephemeral range (32768–60999): a port the kernel hands out for
 * `listen(0)` or an outgoing connection is never one of these, so none is taken between being
 * found free and being listened on — except by another caller of this function. In this process
 * a port is never handed out twice; across processes (CI runs two test passes at once, each with
 * its own Redis nodes and services), a port handed out is reserved by a file for RESERVED_MS, the
 * longest a caller takes to listen on it.
 */
const LOWEST = 20_000;
const HIGHEST = 32_767;
const RESERVED_MS = 60_000;
const RESERVATIONS = join(tmpdir(), 'sluice-test-ports');
const handedOut = new Set<number>();

/** A TCP port on loopback that nothing listens on now, and not one handed out before. */
export async function freePort(): Promise<number> {
  mkdirSync(RESERVATIONS, { recursive: true });
  for (let tries = 0; tries < 100; tries++) {
    const port = LOWEST + Math.floor(Math.random() * (HIGHEST - LOWEST + 1));
    if (handedOut.has(port) || !reserve(port)) continue;
    if (!(await listenable(port))) continue;
    handedOut.add(port);
    return port;
  }
  throw new Error(`no free port found between ${LOWEST} and ${HIGHEST}`);
}

/** True when no other process reserved `port` within RESERVED_MS; it is reserved now. */
function reserve(port: number): boolean {
  const file = join(RESERVATIONS, String(port));
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      closeSync(openSync(file, 'wx'));
      return true;
    } catch {
      // Taken: by a run still starting what it drew, or long ago (then it is free again).
      try {
        if (Date.now() - statSync(file).mtimeMs < RESERVED_MS) return false;
        unlinkSync(file);
      } catch {
        // Removed meanwhile by another process: try once more.
      }
    }
  }
  return false;
}

async function listenable(port: number): Promise<boolean> {
  const server = createServer();
  server.listen(port, '127.0.0.1');
  try {
    // Rejects on 'error' (EADDRINUSE).
    await once(server, 'listening');
  } catch {
    return false;
  }
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return true;
}
