import { once } from 'node:events';
import { createServer } from 'node:net';

/**
 * Ports are drawn below Linux's ephemeral range (32768–60999): a port the kernel hands out for
 * `listen(0)` or an outgoing connection is never one of these, so none is taken between being
 * found free and being listened on — except by another caller of this function, which is why a
 * port is never handed out twice by one process, and why it is drawn at random.
 */
const LOWEST = 20_000;
const HIGHEST = 32_767;
const handedOut = new Set<number>();

/** A TCP port on loopback that nothing listens on now, and not one this process returned before. */
export async function freePort(): Promise<number> {
  for (let tries = 0; tries < 100; tries++) {
    const port = LOWEST + Math.floor(Math.random() * (HIGHEST - LOWEST + 1));
    if (handedOut.has(port)) continue;
    if (!(await listenable(port))) continue;
    handedOut.add(port);
    return port;
  }
  throw new Error(`no free port found between ${LOWEST} and ${HIGHEST}`);
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
