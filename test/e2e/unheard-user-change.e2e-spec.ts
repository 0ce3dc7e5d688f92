import { backendsOf, closeDb, db, eventually, execute, request } from './support/client';
import { startExtraApi } from './support/extra-api';
import { createRole, createUser, dropRole, freshLogin } from './support/users';

/**
 * A user changed while no api listened (the `sluice users` command's notice went unheard): an api
 * that starts checks the users of every query under way and of every kept result, and ends what
 * is no longer theirs. Redis only: in standalone mode no other api shares the queue, so it runs
 * in the first pass only.
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
