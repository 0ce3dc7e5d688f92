import { randomUUID } from 'node:crypto';
import { RedisKeys, RedisQueryRegistry } from '@app/transport';
import { queuedRecord } from '../support/query-record';
import { backendsOf, closeDb, db, e2eEnv, eventually, execute, request } from './support/client';
import { startExtraApi } from './support/extra-api';
import { connectTestRedis, keysMatching } from './support/redis';
import { randomName } from './support/service';
import { cli, createRole, createUser, dropRole, freshLogin } from './support/users';

/**
 * A user changed while no api listened (the `sluice users` command's notice went unheard): an api
 * that starts checks the users of every query under way and of every kept result, and ends what
 * is no longer theirs; and `sluice users remove` forgets the user's queries itself. Redis only: in
 * standalone mode no other api shares the queue, so it runs in the first pass only.
 */
afterAll(() => closeDb());

it('ends the running query of a user removed while no api heard of it, once an api starts', async () => {
  const user = await createUser({ prefix: 'e2e_unheard' });
  try {
    const login = await freshLogin(user.username, user.password);
    const token = login.json.access_token as string;
    const res = await execute({ statement: 'select pg_sleep(30)', wait_timeout: 0 }, { token });
    expect(res.status).toBe(202);
    const queryId = res.json.query_id as string;
    await eventually(async () => ((await backendsOf(queryId)) > 0 ? true : undefined));
    // Only the row goes, and no notice: the apis running never hear of it.
    await db().query('DELETE FROM sluice.users WHERE username = $1', [user.username]);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(await backendsOf(queryId)).toBe(1);
    const extra = await startExtraApi();
    try {
      await eventually(async () => ((await backendsOf(queryId)) === 0 ? true : undefined), 15_000);
    } finally {
      await extra.stop();
    }
  } finally {
    await dropRole(user.role);
  }
}, 90_000);

it('drops the kept result of a user given another role while no api heard of it, once an api starts', async () => {
  const user = await createUser({ prefix: 'e2e_unheard' });
  const other = await createRole('e2e_unheard');
  try {
    const login = await freshLogin(user.username, user.password);
    const token = login.json.access_token as string;
    // Kept, and nothing else of theirs under way once it has run.
    const res = await execute({ statement: 'select 42 as kept', wait_timeout: 0 }, { token });
    expect(res.status).toBe(202);
    const path = `/v1/queries/${res.json.query_id as string}`;
    const get = (suffix = '') => request(undefined, { method: 'GET', path: path + suffix, token });
    const keptUntil = await eventually(async () => {
      const info = await get();
      return info.json.state === 'succeeded' ? Date.parse(info.json.result_kept_until) : undefined;
    });
    expect((await get('/result')).status).toBe(200);
    // Only the row changes, and no notice: the apis running never hear of it.
    await db().query('UPDATE sluice.users SET role = $2 WHERE username = $1', [
      user.username,
      other,
    ]);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect((await get('/result')).status).toBe(200);
    const extra = await startExtraApi();
    try {
      await eventually(async () => ((await get('/result')).status === 410 ? true : undefined));
      // Dropped, not lapsed (the suite keeps results a few seconds).
      expect(Date.now()).toBeLessThan(keptUntil);
    } finally {
      await extra.stop();
    }
  } finally {
    await db().query('DELETE FROM sluice.users WHERE username = $1', [user.username]);
    await dropRole(user.role);
    await dropRole(other);
  }
}, 90_000);

it('forgets the records, slots and Idempotency-Keys of a user removed with sluice users, heard of or not', async () => {
  // Under a key prefix no api of the suite reads: an api that hears the command's notice forgets
  // the user under its own prefix, so only the command itself can forget what is here.
  const prefix = randomName('e2e_clirm');
  const redis = connectTestRedis();
  const registry = new RedisQueryRegistry(
    redis,
    new RedisKeys(prefix),
    { seconds: 600, count: 1000 },
    e2eEnv().slotLeaseMs,
  );
  const limits = { ttlSeconds: 60, most: 1000 };
  const user = await createUser({ prefix: 'e2e_clirm' });
  try {
    const ended = { ...queuedRecord(randomUUID(), user.username), kept: true };
    await registry.create(ended);
    await registry.transition(ended.queryId, 'succeeded');
    const claim = { queryId: ended.queryId, fingerprint: 'a' };
    expect(
      await registry.claimKey({ owner: user.username, key: 'the-key' }, claim, limits),
    ).toEqual({
      outcome: 'claimed',
    });
    // Their one slot taken: a second query would wait.
    expect(await registry.admit(user.username, randomUUID(), 1)).toBe(0);
    expect(await registry.admit(user.username, randomUUID(), 1)).toBeUndefined();

    // With the api's settings: its Redis too.
    const removed = await cli(['users', 'remove', user.username], '', {
      ...e2eEnv().redisEnv,
      SLUICE_KEY_PREFIX: prefix,
    });
    expect(removed).toMatchObject({ code: 0, stdout: `removed user ${user.username}\n` });

    // Gone by the time the command ends, as DELETE /v1/users leaves them.
    expect(await registry.get(ended.queryId)).toBeUndefined();
    expect(await registry.list(100, user.username)).toEqual([]);
    expect(
      await registry.claimKey({ owner: user.username, key: 'the-key' }, claim, limits),
    ).toEqual({
      outcome: 'claimed',
    });
    expect(await registry.admit(user.username, randomUUID(), 1)).toBe(0);
  } finally {
    await registry.close();
    const keys = await keysMatching(redis, `${prefix}*`);
    for (const key of keys) await redis.del(key);
    redis.disconnect();
    await db().query('DELETE FROM sluice.users WHERE username = $1', [user.username]);
    await dropRole(user.role);
  }
}, 60_000);
