import { backendsOf, closeDb, db, eventually, execute } from './support/client';
import { startExtraApi } from './support/extra-api';
import { createUser, dropRole, freshLogin } from './support/users';

/**
 * A user removed while no api listened (the `sluice users` command's notice went unheard): an api
 * that starts checks the users of every query under way, and ends the removed user's. Redis
 * only: in standalone mode no other api shares the queue, so it runs in the first pass only.
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
