import { Client } from 'pg';
import { loadConfig } from '@app/config';
import { connectTestDatabase, testDatabaseUrl } from '@test/settings';
import { TcpProxy, endSessionsBehind, proxyToTestDatabase } from '@test/support/tcp.proxy';
import { RoleCatalogService } from './role-catalog.service';

/** The api's reads of PostgreSQL's roles, over a pooled connection whose session ended. */
describe(RoleCatalogService.name, () => {
  let control: Client;
  let proxy: TcpProxy;
  let catalog: RoleCatalogService;

  beforeAll(async () => {
    control = await connectTestDatabase();
  });

  afterAll(async () => {
    await control.end();
  });

  beforeEach(async () => {
    proxy = await proxyToTestDatabase();
    catalog = new RoleCatalogService(loadConfig({ DATABASE_URL: proxy.urlFor(testDatabaseUrl) }));
  });

  afterEach(async () => {
    await catalog.close();
    await proxy.stop();
  });

  it('checks CONNECT and membership on a new connection, not 503, when its session had ended', async () => {
    const me = (await control.query<{ me: string }>('SELECT current_user AS me')).rows[0].me;
    const database = new URL(testDatabaseUrl).pathname.slice(1);
    expect((await catalog.controlLogin()).role).toBe(me);
    await endSessionsBehind(proxy, control);
    // Not asked before: no cached answer hides the read.
    expect(await catalog.databaseAccess(me, database)).toBe('ok');
    await endSessionsBehind(proxy, control);
    expect(await catalog.isMember(me, me)).toBe(true);
    expect(proxy.heldReplies).toBe(2);
  });
});
