import { once } from 'node:events';
import { AddressInfo, createServer } from 'node:net';

/** A TCP port on loopback that nothing listens on now. */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  server.close();
  return port;
}
