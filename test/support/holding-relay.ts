import net from 'node:net';

/**
 * A TCP relay to PostgreSQL that can hold back what the server sends: a network (or a busy
 * thread) that delivers the server's last words late. Held replies are let through as soon as
 * the client sends again; what it sent meanwhile is dropped (its backend is gone).
 */
export class HoldingRelay {
  heldReplies = 0;
  private held = false;
  private readonly upstreams = new Set<net.Socket>();
  private readonly sockets = new Set<net.Socket>();

  private readonly server: net.Server;

  private constructor(host: string, port: number) {
    this.server = net.createServer((client) => this.relay(client, host, port));
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  static async start(host: string, port: number): Promise<HoldingRelay> {
    const relay = new HoldingRelay(host, port);
    await new Promise<void>((resolve) => relay.server.listen(0, '127.0.0.1', resolve));
    return relay;
  }

  /** `url` (a PostgreSQL URL) with its host and port replaced by the relay's. */
  urlFor(url: string): string {
    const relayed = new URL(url);
    relayed.hostname = '127.0.0.1';
    relayed.port = String(this.port);
    return relayed.toString();
  }

  holdReplies(): void {
    this.held = true;
    for (const upstream of this.upstreams) upstream.pause();
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }

  private relay(client: net.Socket, host: string, port: number): void {
    const upstream = net.connect(port, host);
    this.upstreams.add(upstream);
    this.sockets.add(client).add(upstream);
    upstream.on('data', (data) => client.write(data));
    upstream.on('end', () => client.end());
    client.on('data', (data) => {
      if (!this.held) {
        upstream.write(data);
        return;
      }
      this.held = false;
      this.heldReplies += 1;
      for (const other of this.upstreams) other.resume();
    });
    client.on('end', () => upstream.end());
    // Either side gone: the other goes too.
    for (const [one, other] of [
      [client, upstream],
      [upstream, client],
    ]) {
      one.on('error', () => other.destroy());
      one.on('close', () => {
        this.upstreams.delete(upstream);
        other.destroy();
      });
    }
  }
}
