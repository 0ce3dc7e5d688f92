import { Client } from 'pg';
import { isConnectTimeout } from '@app/access';
import { connectTestDatabase, testDatabaseUrl } from '@test/settings';
import { endSessionsBehind, proxyToTestDatabase } from '@test/support/tcp.proxy';
import { DatabaseHandle } from './database.registry';

const SCHEMA = `sluice_registry_${process.pid}_${Date.now()}`;

describe(DatabaseHandle.name, () => {
  let client: Client;
  let handle: DatabaseHandle;

  /** The oid of a type, and the text of one value of it. */
  async function valueOf(sql: string): Promise<{ oid: number; text: string }> {
    const result = await client.query<[string]>({
      text: sql,
      rowMode: 'array',
      types: { getTypeParser: () => (v: string) => v },
    });
    return { oid: result.fields[0].dataTypeID, text: result.rows[0][0] };
  }

  beforeAll(async () => {
    client = await connectTestDatabase();
    await client.query(`CREATE SCHEMA ${SCHEMA}`);
    await client.query(`CREATE TABLE ${SCHEMA}.items (id int, tags text[])`);
    await client.query(`INSERT INTO ${SCHEMA}.items VALUES (1, '{a,"b c"}')`);
  });

  beforeEach(() => {
    handle = new DatabaseHandle(testDatabaseUrl);
  });

  afterEach(async () => {
    await handle.close();
  });

  afterAll(async () => {
    await client.query(`DROP SCHEMA ${SCHEMA} CASCADE`);
    await client.end();
  });

  it('asks again on a new connection when its pooled one had a session PostgreSQL ended', async () => {
    const proxy = await proxyToTestDatabase();
    const through = new DatabaseHandle(proxy.urlFor(testDatabaseUrl));
    try {
      await through.version();
      await endSessionsBehind(proxy, client);
      const { oid } = await valueOf(`SELECT t FROM ${SCHEMA}.items t`);
      await through.ensureTypes([oid]);
      expect(through.catalog.missing([oid])).toEqual([]);
      await endSessionsBehind(proxy, client);
      // No such statement: nothing to signal, and no failure either.
      const none = { pid: 1, secretKey: 1, user: 'nobody', host: '127.0.0.1', port: 5432 };
      expect(await through.terminate(none)).toBe(false);
      expect(proxy.heldReplies).toBe(2);
    } finally {
      await through.close();
      await proxy.stop();
    }
  });

  it('gives up on a connection PostgreSQL takes and never answers, after its connect timeout', async () => {
    const proxy = await proxyToTestDatabase();
    proxy.answerNothing();
    const through = new DatabaseHandle(proxy.urlFor(testDatabaseUrl), 300);
    try {
      const started = Date.now();
      const failure: unknown = await through.version().catch((err: unknown) => err);
      expect(Date.now() - started).toBeLessThan(2_000);
      expect(isConnectTimeout(failure)).toBe(true);
    } finally {
      await through.close();
      await proxy.stop();
    }
  }, 5_000);

  it('loads an array type, its element and the element attributes, one round each', async () => {
    const { oid, text } = await valueOf(`SELECT array_agg(t) FROM ${SCHEMA}.items t`);
    await handle.ensureTypes([oid]);
    expect(handle.catalog.missing([oid])).toEqual([]);
    expect(handle.catalog.jsonEncoder(oid)(text)).toBe('[{"id":1,"tags":["a","b c"]}]');
  });

  it('loads a composite again on every use, so that ALTER TABLE shows at once', async () => {
    const before = await valueOf(`SELECT t FROM ${SCHEMA}.items t`);
    await handle.ensureTypes([before.oid]);
    expect(handle.catalog.jsonEncoder(before.oid)(before.text)).toBe('{"id":1,"tags":["a","b c"]}');
    await client.query(`ALTER TABLE ${SCHEMA}.items ADD COLUMN price numeric DEFAULT 1.50`);
    await client.query(`ALTER TABLE ${SCHEMA}.items RENAME COLUMN tags TO labels`);
    const after = await valueOf(`SELECT t FROM ${SCHEMA}.items t`);
    expect(after.oid).toBe(before.oid);
    await handle.ensureTypes([after.oid]);
    expect(handle.catalog.jsonEncoder(after.oid)(after.text)).toBe(
      '{"id":1,"labels":["a","b c"],"price":1.50}',
    );
  });
});
