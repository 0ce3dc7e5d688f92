import { Client } from 'pg';
import { testDatabaseUrl } from '@test/settings';
import { statementSocket } from './login.pools';
import { TextCursor } from './text.cursor';

jest.setTimeout(30_000);

const ROWS = 800;
/** Rows cut by many reads of the socket, some of them longer than a read (2 bytes a character). */
const WIDE_ROWS = `SELECT g::text AS g, md5(g::text) AS h, repeat(chr(233), (g * 7919) % 40000) AS pad
  FROM generate_series(1, ${ROWS}) g`;

/** A client whose socket reads into the thread's shared buffer, as a statement connection's. */
async function sharedReadClient(): Promise<Client> {
  const client = new Client({ connectionString: testDatabaseUrl, stream: statementSocket as never });
  await client.connect();
  return client;
}

describe(statementSocket.name, () => {
  let clients: Client[] = [];

  afterEach(async () => {
    await Promise.all(clients.map((c) => c.end()));
    clients = [];
  });

  it('reads the same rows as a socket of its own, with two connections reading at once', async () => {
    clients = await Promise.all([sharedReadClient(), sharedReadClient()]);
    // pg's own query (rows as strings) and TextCursor (rows copied as bytes), interleaved: each
    // read of one lands in the buffer the other's read was in.
    const [plain, cursor] = clients;
    const asStrings = plain.query({ text: WIDE_ROWS, rowMode: 'array' });
    const reading = cursor.query(new TextCursor(WIDE_ROWS, [], []));
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
      for (const got of [rows[g - 1], batches[g - 1]]) {
        expect(got[0]).toBe(String(g));
        expect(got[1]).toMatch(/^[0-9a-f]{32}$/);
        expect(got[2]).toBe('é'.repeat((g * 7919) % 40000));
      }
    }
  });
});
