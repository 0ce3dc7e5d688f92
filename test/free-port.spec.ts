import { once } from 'node:events';
import { createServer } from 'node:net';
import { freePort } from './support/free-port';

describe('freePort', () => {
  it('never hands out one port twice, nor one from the kernel’s ephemeral range', async () => {
    const ports: number[] = [];
    for (let i = 0; i < 300; i++) ports.push(await freePort());
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
