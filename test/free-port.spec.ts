import { once } from 'node:events';
import { mkdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './support/free-port';

const RESERVATIONS = join(tmpdir(), 'sluice-test-ports');

/** The value of Math.random() that makes freePort draw `port` (its range is 20000–32767). */
const drawing = (port: number) => (port - 20_000 + 0.5) / (32_767 - 20_000 + 1);

describe('freePort', () => {
  afterEach(() => jest.restoreAllMocks());

  it('skips a port another process reserved a moment ago, and takes one whose reservation is old', async () => {
    // First in this file: ports this process has not handed out yet.
    const [fresh, stale, next] = [20_011, 20_013, 20_017];
    mkdirSync(RESERVATIONS, { recursive: true });
    for (const port of [fresh, stale, next])
      rmSync(join(RESERVATIONS, String(port)), { force: true });
    writeFileSync(join(RESERVATIONS, String(fresh)), '');
    writeFileSync(join(RESERVATIONS, String(stale)), '');
    const longAgo = new Date(Date.now() - 10 * 60_000);
    utimesSync(join(RESERVATIONS, String(stale)), longAgo, longAgo);
    jest
      .spyOn(Math, 'random')
      .mockReturnValueOnce(drawing(fresh))
      .mockReturnValueOnce(drawing(stale))
      .mockReturnValueOnce(drawing(next));
    expect(await freePort()).toBe(stale);
  });

  it('never hands out one port twice, nor one from the kernel’s ephemeral range', async () => {
    const ports: number[] = [];
    for (let i = 0; i < 100; i++) ports.push(await freePort());
    expect(new Set(ports).size).toBe(ports.length);
    expect(ports.every((p) => p >= 20_000 && p < 32_768)).toBe(true);
  });

  it('hands out a port nothing listens on', async () => {
    const port = await freePort();
    const server = createServer();
    server.listen(port, '127.0.0.1');
    await once(server, 'listening');
    server.close();
  });
});
