import { AddressInfo, Server, Socket, createServer } from 'node:net';
import { Client } from 'pg';
import { connectTestDatabase, testDatabaseUrl } from '@test/settings';
import { passwordChecked, watchPasswordRequest } from './password.request';

type Asks = 'nothing' | 'cleartext' | 'md5' | 'scram';

function message(type: string, body: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head.write(type, 0, 'latin1');
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

function int32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n);
  return b;
}

const authOk = message('R', int32(0));
const ready = message('Z', Buffer.from('I'));
const wrongPassword = message(
  'E',
  Buffer.from('SFATAL\0C28P01\0Mpassword authentication failed\0\0', 'latin1'),
);

/**
 * A server speaking just enough of PostgreSQL's protocol to let a client in after asking for the
 * password the way `asks` says (or not at all), the way a real server's pg_hba.conf would.
 */
async function fakeServer(asks: Asks): Promise<{ server: Server; port: number }> {
  const server = createServer((socket: Socket) => {
    let startup = true;
    socket.on('data', () => {
      if (startup) {
        startup = false;
        if (asks === 'nothing') socket.write(Buffer.concat([authOk, ready]));
        else if (asks === 'cleartext') socket.write(message('R', int32(3)));
        else if (asks === 'md5') {
          socket.write(message('R', Buffer.concat([int32(5), Buffer.from([1, 2, 3, 4])])));
        } else {
          socket.write(message('R', Buffer.concat([int32(10), Buffer.from('SCRAM-SHA-256\0\0')])));
        }
        return;
      }
      // The password (or SCRAM's first message): take cleartext and MD5, refuse SCRAM's.
      if (asks === 'scram') socket.end(wrongPassword);
      else socket.write(Buffer.concat([authOk, ready]));
    });
    socket.on('error', () => undefined);
  });
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return { server, port: (server.address() as AddressInfo).port };
}

describe(watchPasswordRequest.name, () => {
  it.each<[Asks, boolean]>([
    ['nothing', false],
    ['cleartext', true],
    ['md5', true],
    ['scram', true],
  ])('when the server asks for %s, says %s', async (asks, asked) => {
    const { server, port } = await fakeServer(asks);
    const client = new Client({
      host: '127.0.0.1',
      port,
      user: 'someone',
      password: 'a password',
      database: 'db',
    });
    client.on('error', () => undefined);
    const wasAsked = watchPasswordRequest(client);
    try {
      if (asks === 'scram') await expect(client.connect()).rejects.toThrow(/password/);
      else await client.connect();
      expect(wasAsked()).toBe(asked);
    } finally {
      await client.end().catch(() => undefined);
      server.close();
    }
  });

  it("says false on the test server, which trusts loopback logins (this machine's pg_hba.conf)", async () => {
    // Fails loudly where the test server asks for passwords: then this case tests nothing.
    const probe = await connectTestDatabase();
    const { rows } = await probe.query<{ v: number }>(
      "SELECT current_setting('server_version_num')::int AS v",
    );
    await probe.end();
    const client = new Client({ connectionString: testDatabaseUrl, password: 'anything at all' });
    const wasAsked = watchPasswordRequest(client);
    await client.connect();
    try {
      expect(wasAsked()).toBe(false);
      if (rows[0].v >= 160000) {
        const { rows: who } = await client.query<{ u: string | null }>('SELECT system_user AS u');
        expect(passwordChecked(who[0].u)).toBe(false);
      }
    } finally {
      await client.end();
    }
  });
});

describe(passwordChecked.name, () => {
  it.each<[string | null, boolean]>([
    [null, false],
    ['scram-sha-256:alice', true],
    ['md5:alice', true],
    ['password:alice', true],
    ['ldap:alice', true],
    ['trust:alice', false],
    ['peer:root', false],
    ['cert:CN=alice', false],
    ['gss:alice@REALM', false],
    ['scram-sha-256', false],
    [':alice', false],
  ])('says %s checked a password: %s', (systemUser, checked) => {
    expect(passwordChecked(systemUser)).toBe(checked);
  });
});
