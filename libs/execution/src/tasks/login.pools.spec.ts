import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { type AddressInfo, createServer } from 'node:net';
import { Client } from 'pg';
import { testDatabaseUrl } from '@test/settings';
import { statementSocket } from './login.pools';
import { threadReadBuffer } from './read.buffer';
import { TextCursor } from './text.cursor';

jest.setTimeout(30_000);

const ROWS = 800;
/**
 * Rows cut by many reads of the socket, some longer than a read (2 bytes a character), each
 * connection's its own: `seed` and `pad` tell whose read a value came from.
 */
const wideRows = (seed: string, pad: string) =>
  `SELECT g::text AS g, md5('${seed}' || g) AS h, repeat('${pad}', (g * 7919) % 40000) AS pad
  FROM generate_series(1, ${ROWS}) g`;
const md5 = (text: string) => createHash('md5').update(text).digest('hex');

/** A client whose socket reads into the thread's shared buffer, as a statement connection's. */
async function sharedReadClient(): Promise<Client> {
  const client = new Client({
    connectionString: testDatabaseUrl,
    stream: statementSocket as never,
  });
  await client.connect();
  return client;
}

describe(statementSocket.name, () => {
  let clients: Client[] = [];

  afterEach(async () => {
    await Promise.all(clients.map((c) => c.end()));
    clients = [];
  });

  it("gives each of two connections reading at once its own rows, never the other's", async () => {
    clients = await Promise.all([sharedReadClient(), sharedReadClient()]);
    // pg's own query (rows as strings) on one, TextCursor (rows copied as bytes) on the other,
    // interleaved as the socket's reads come: each read of one lands in the memory the other's
    // read was in, so a byte kept across reads would show as the other user's seed or character.
    // (read.buffer.spec alternates two parsers' reads in a fixed order.)
    const [plain, cursor] = clients;
    const asStrings = plain.query({ text: wideRows('a', 'é'), rowMode: 'array' });
    const reading = cursor.query(new TextCursor(wideRows('b', 'ü'), [], []));
    const batches: (string | null)[][] = [];
    for (;;) {
      const batch = await reading.readBatch(500);
      if (batch.length === 0) break;
      batches.push(...batch.text());
    }
    await reading.closePortal();
    const rows = (await asStrings).rows as (string | null)[][];
    expect(rows).toHaveLength(ROWS);
    expect(batches).toHaveLength(ROWS);
    for (let g = 1; g <= ROWS; g++) {
      const width = (g * 7919) % 40000;
      expect(rows[g - 1]).toEqual([String(g), md5(`a${g}`), 'é'.repeat(width)]);
      expect(batches[g - 1]).toEqual([String(g), md5(`b${g}`), 'ü'.repeat(width)]);
    }
  });

  it('reads into the shared buffer, or as Node does for a connection over TLS', async () => {
    const server = createServer((peer) => peer.end(Buffer.from('bytes')));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    /** The memory the first bytes a socket made by statementSocket(config) emits lie in. */
    const memoryOfRead = async (config: { ssl?: unknown }) => {
      const socket = statementSocket(config);
      socket.connect(port, '127.0.0.1');
      const [data] = (await once(socket, 'data')) as [Buffer];
      socket.destroy();
      expect(data.toString()).toBe('bytes');
      return data.buffer;
    };
    try {
      expect(await memoryOfRead({})).toBe(threadReadBuffer().buffer);
      // TLS wraps the socket's own handle: its reads must stay Node's, not the shared buffer's.
      expect(await memoryOfRead({ ssl: {} })).not.toBe(threadReadBuffer().buffer);
    } finally {
      server.close();
    }
  });
});
