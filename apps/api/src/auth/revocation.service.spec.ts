import { randomUUID } from 'node:crypto';
import { Pool } from 'pg';
import { loadConfig } from '@app/config';
import { testDatabaseUrl } from '@test/settings';
import { until } from '@test/support/poll';
import { MetadataEventsService, MetadataSchema } from '@app/users';
import { RevocationService } from './revocation.service';

/** Revocations held in memory, on the metadata tables of the test database. */
describe(RevocationService.name, () => {
  // API tokens live a minute, the admin pages' cookie a quarter of an hour: both allowed.
  const config = loadConfig({
    DATABASE_URL: testDatabaseUrl,
    SLUICE_JWT_TTL_SECONDS: '60',
    SLUICE_ADMIN_SESSION_SECONDS: '900',
  });
  let pool: Pool;
  let events: MetadataEventsService;
  let revocations: RevocationService;
  const revoked: string[] = [];

  beforeEach(async () => {
    pool = new Pool({ connectionString: testDatabaseUrl, max: 2 });
    events = new MetadataEventsService(pool, config);
    revocations = new RevocationService(pool, new MetadataSchema(pool), events);
    // Listening first: the memory is then trusted once the service has read the table.
    await events.onModuleInit();
    expect(events.live).toBe(true);
    await revocations.onModuleInit();
  });

  afterEach(async () => {
    jest.restoreAllMocks();
    revocations.onModuleDestroy();
    await events.onModuleDestroy();
    await pool.query('DELETE FROM sluice.revoked_tokens WHERE jti = ANY($1)', [revoked]);
    await pool.end();
  });

  it('keeps a signed-out admin cookie revoked until it expires, though it outlives an API token', async () => {
    const jti = randomUUID();
    revoked.push(jti);
    const now = Date.now();
    // The cookie's token: SLUICE_ADMIN_SESSION_SECONDS from now, longer than SLUICE_JWT_TTL_SECONDS.
    expect(await revocations.revoke(jti, now + 900_000, 'alice')).toBe(true);
    expect(await revocations.isRevoked(jti)).toBe(true);
    // Two minutes on: past an API token's life, well within the cookie's; the minutely prune runs.
    jest.spyOn(Date, 'now').mockReturnValue(now + 120_000);
    await (revocations as unknown as { prune(): Promise<void> }).prune();
    expect(await revocations.isRevoked(jti)).toBe(true);
  });

  it('asks the database while its notification connection is down, and holds what it missed once that is back', async () => {
    const listening = (events as unknown as { client: { processID: number } }).client.processID;
    await pool.query('SELECT pg_terminate_backend($1)', [listening]);
    await until(() => Promise.resolve(!events.live), 5_000);
    // Revoked by another process meanwhile: its notification reaches nobody here.
    const jti = randomUUID();
    revoked.push(jti);
    await pool.query(
      `INSERT INTO sluice.revoked_tokens (jti, username, expires_at)
       VALUES ($1, 'bob', now() + interval '1 minute')`,
      [jti],
    );
    expect(await revocations.isRevoked(jti)).toBe(true);
    expect(await revocations.isRevoked(randomUUID())).toBe(false);
    // Listening again: the table is read whole, and checks are answered from memory.
    await until(() => Promise.resolve(events.live), 5_000);
    await until(async () => revocations.cached > 0 && (await revocations.isRevoked(jti)), 5_000);
    const asked = jest.spyOn(pool, 'query');
    await until(async () => {
      asked.mockClear();
      return (await revocations.isRevoked(randomUUID())) === false && asked.mock.calls.length === 0;
    }, 5_000);
    expect(await revocations.isRevoked(jti)).toBe(true);
    expect(asked).not.toHaveBeenCalled();
  });
});
