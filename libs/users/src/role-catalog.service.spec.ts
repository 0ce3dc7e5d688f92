import { loadConfig } from '@app/config';
import { testDatabaseUrl } from '@test/settings';
import { endSessionsBehind, proxiedEachCase } from '@test/support/tcp.proxy';
import { RoleCatalogService } from './role-catalog.service';

/** The api's reads of PostgreSQL's roles, over a pooled connection whose session ended. */
describe(RoleCatalogService.name, () => {
  const spec = proxiedEachCase(
    (url) => new RoleCatalogService(loadConfig({ DATABASE_URL: url })),
    (catalog) => catalog.close(),
  );

  it('checks CONNECT and membership on a new connection, not 503, when its session had ended', async () => {
    const me = (await spec.control.query<{ me: string }>('SELECT current_user AS me')).rows[0].me;
    const database = new URL(testDatabaseUrl).pathname.slice(1);
    expect((await spec.made.controlLogin()).role).toBe(me);
    await endSessionsBehind(spec.proxy, spec.control);
    // Not asked before: no cached answer hides the read.
    expect(await spec.made.databaseAccess(me, database)).toBe('ok');
    await endSessionsBehind(spec.proxy, spec.control);
    expect(await spec.made.isMember(me, me)).toBe(true);
    expect(spec.proxy.heldReplies).toBe(2);
  });
});
