import { once } from 'node:events';
import { Server, Socket, createConnection, createServer } from 'node:net';

/** A loopback TCP proxy that a test can cut and restore, to take a server "down" and back. */
export class TcpProxy {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();

  constructor(
    readonly port: number,
    private readonly targetPort: number,
    /** Cuts a connection that carries nothing either way for this long (ms), as proxies do. */
    private readonly idleTimeoutMs?: number,
  ) {}

  async start(): Promise<void> {
    this.server = createServer((client) => {
      const upstream = createConnection({ host: '127.0.0.1', port: this.targetPort });
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => undefined);
      }
      client.pipe(upstream).pipe(client);
      if (this.idleTimeoutMs) {
        // Both directions go through the client socket: its timeout sees any traffic.
        client.setTimeout(this.idleTimeoutMs, () => client.destroy());
      }
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    this.server.listen(this.port, '127.0.0.1');
    await once(this.server, 'listening');
  }

  /** Drops every connection and refuses new ones. */
  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise((resolve) => server.close(resolve));
  }
}
