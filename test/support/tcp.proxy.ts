import { once } from 'node:events';
import { Server, Socket, createConnection, createServer } from 'node:net';
import type { Client } from 'pg';
import { connectTestDatabase, testDatabaseUrl } from '../settings';
import { freePort } from './free-port';

/** Runs a query (a pg Client or Pool). */
interface Queryable {
  query(text: string, values?: unknown[]): Promise<unknown>;
}

/**
 * A loopback TCP proxy that a test can cut and restore, to take a server "down" and back — or
 * whose replies it can hold back, as a network (or a busy thread) that delivers a server's last
 * words late.
 */
export class TcpProxy {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  /** Each connection's two sides, client first. */
  private readonly pairs = new Set<[Socket, Socket]>();
  /** Replies held back since holdReplies(), let through when a client sends again. */
  heldReplies = 0;
  /** Set by answerNothing(): new connections are taken and never passed on. */
  private silent = false;
  /** Set by loseReplyTo(): looks at what each client sends. */
  private trap: ((sent: Buffer, client: Socket, upstream: Socket) => void) | undefined;

  constructor(
    readonly port: number,
    private readonly targetPort: number,
    /** Cuts a connection that carries nothing either way for this long (ms), as proxies do. */
    private readonly idleTimeoutMs?: number,
  ) {}

  async start(): Promise<void> {
    this.server = createServer((client) => {
      if (this.silent) {
        this.sockets.add(client);
        client.on('close', () => this.sockets.delete(client));
        client.on('error', () => undefined);
        return;
      }
      const upstream = createConnection({ host: '127.0.0.1', port: this.targetPort });
      const pair: [Socket, Socket] = [client, upstream];
      this.pairs.add(pair);
      for (const s of pair) {
        this.sockets.add(s);
        s.on('close', () => {
          this.sockets.delete(s);
          this.pairs.delete(pair);
        });
        s.on('error', () => undefined);
      }
      client.pipe(upstream).pipe(client);
      client.on('data', (sent: Buffer) => this.trap?.(sent, client, upstream));
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

  /** `url` with its host and port replaced by the proxy's. */
  urlFor(url: string): string {
    const through = new URL(url);
    through.hostname = '127.0.0.1';
    through.port = String(this.port);
    return through.toString();
  }

  /**
   * Holds back what the servers send on the open connections until their client sends again;
   * what the client sends then is dropped (its server is taken to be gone), and the held replies
   * follow.
   */
  holdReplies(): void {
    for (const [client, upstream] of this.pairs) {
      upstream.unpipe(client);
      upstream.pause();
      client.unpipe(upstream);
      client.once('data', () => {
        this.heldReplies += 1;
        upstream.pipe(client);
        client.pipe(upstream);
      });
      // unpipe() paused it: a 'data' listener alone would not start it again.
      client.resume();
    }
  }

  /**
   * Takes new connections and never answers them nor passes them on, as a server behind a
   * network that lost its way, or with a full backlog, does. Open connections go on as before.
   */
  answerNothing(): void {
    this.silent = true;
  }

  /**
   * Passes on the next request that `matches` but loses its reply: once the server has answered
   * it (so it surely ran), that connection is cut, as a network does that fails between a
   * command and its reply. Resolves when it is cut.
   */
  loseReplyTo(matches: (sent: Buffer) => boolean): Promise<void> {
    return new Promise((resolve) => {
      this.trap = (sent, client, upstream) => {
        if (!matches(sent)) return;
        this.trap = undefined;
        upstream.unpipe(client);
        upstream.once('data', () => {
          client.destroy();
          upstream.destroy();
          resolve();
        });
        // unpipe() paused it: a 'data' listener alone would not start it again.
        upstream.resume();
      };
    });
  }

  /** The proxy's side of its connections to the target: their client ports, as the target sees them. */
  upstreamPorts(): number[] {
    return [...this.pairs].map(([, upstream]) => upstream.localPort!).filter(Boolean);
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

/**
 * Ends the PostgreSQL sessions behind `proxy` (pg_terminate_backend over `control`, waiting until
 * they are gone) with PostgreSQL's notice held back: a pool then hands out their connections as
 * if alive, as it does whenever the notice comes a moment late. The backends ended.
 */
export async function endSessionsBehind(proxy: TcpProxy, control: Queryable): Promise<number[]> {
  const ports = proxy.upstreamPorts();
  proxy.holdReplies();
  const { rows } = (await control.query(
    `SELECT pid, pg_terminate_backend(pid, 5000) AS ended FROM pg_stat_activity
      WHERE client_port = ANY($1::int[]) AND pid <> pg_backend_pid()`,
    [ports],
  )) as { rows: { pid: number; ended: boolean }[] };
  if (rows.length === 0 || rows.some((r) => !r.ended)) throw new Error('no session ended');
  return rows.map((r) => r.pid);
}

/** A started proxy to the test database; `proxy.urlFor(testDatabaseUrl)` connects through it. */
export async function proxyToTestDatabase(): Promise<TcpProxy> {
  const proxy = new TcpProxy(await freePort(), Number(new URL(testDatabaseUrl).port || 5432));
  await proxy.start();
  return proxy;
}

/** What a case of proxiedEachCase reads: set by its hooks, fresh for each case. */
export interface ProxiedCase<T> {
  /** The spec's own connection, not through the proxy: it ends sessions behind it. */
  control: Client;
  proxy: TcpProxy;
  /** What the spec made over the proxy for the case. */
  made: T;
}

/**
 * Jest hooks of a spec whose every case gets a fresh proxy to the test database, and `make`'s
 * object over it (`close`d after the case), beside one control connection for the whole spec.
 */
export function proxiedEachCase<T>(
  make: (url: string) => T,
  close: (made: T) => Promise<void>,
): ProxiedCase<T> {
  const current = {} as ProxiedCase<T>;
  beforeAll(async () => {
    current.control = await connectTestDatabase();
  });
  afterAll(() => current.control.end());
  beforeEach(async () => {
    current.proxy = await proxyToTestDatabase();
    current.made = make(current.proxy.urlFor(testDatabaseUrl));
  });
  afterEach(async () => {
    await close(current.made);
    await current.proxy.stop();
  });
  return current;
}
