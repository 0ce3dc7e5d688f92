import { Client } from 'pg';
import { loginUrl, ownLoginUrl } from './pg.login';

describe(loginUrl.name, () => {
  const base = 'postgresql://control:secret@db.internal:6543/sales?connect_timeout=10';

  it('keeps host, port and settings, and puts in the login and the database', () => {
    const url = new URL(loginUrl(base, 'hr', { user: 'alice', password: 'pw' }));
    expect(url.host).toBe('db.internal:6543');
    expect(url.searchParams.get('connect_timeout')).toBe('10');
    expect(url.pathname).toBe('/hr');
    expect(url.username).toBe('alice');
  });

  it("keeps DATABASE_URL's database when none is named", () => {
    expect(new URL(loginUrl(base, undefined, { user: 'alice', password: 'pw' })).pathname).toBe(
      '/sales',
    );
  });

  it('gives pg back exactly the name, password and database it was given', () => {
    const user = 'Ünïcode user@with:odd/chars?#%';
    const password = 'p@ss:w/o?r#d%20\'"';
    // pg decodes the path with decodeURI: names with / ? # and the like do not come through.
    const database = 'ünïcode db name';
    const client = new Client({ connectionString: loginUrl(base, database, { user, password }) });
    expect(client.user).toBe(user);
    expect(client.password).toBe(password);
    expect(client.database).toBe(database);
    expect(client.host).toBe('db.internal');
    expect(client.port).toBe(6543);
  });

  it('keeps the login of DATABASE_URL when none is given', () => {
    const url = new URL(loginUrl(base, 'hr'));
    expect([url.username, url.password, url.pathname]).toEqual(['control', 'secret', '/hr']);
  });
});

describe(ownLoginUrl.name, () => {
  it("gives pg the URL's options, then the given ones, then the search path last", () => {
    const url = 'postgresql://control:secret@db.internal/sales?options=-c%20search_path%3Dpublic';
    const client = new Client({ connectionString: ownLoginUrl(url, '-c TimeZone=UTC') });
    // A later -c wins: the URL cannot put a schema users may write to before pg_catalog.
    expect(
      (client as unknown as { connectionParameters: { options: string } }).connectionParameters
        .options,
    ).toBe('-c search_path=public -c TimeZone=UTC -c search_path=pg_catalog,pg_temp');
    expect(client.database).toBe('sales');
  });
});
