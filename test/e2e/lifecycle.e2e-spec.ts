import { request as httpRequest } from 'node:http';
import {
  backendsOf,
  createUser,
  e2eEnv,
  eventually,
  execute,
  holdLock,
  login,
  request,
  slotFillers,
  usersDroppedAfterAll,
} from './support/client';
import { monitorRedis } from './support/redis';

const users = usersDroppedAfterAll();

async function user(prefix: string) {
  const created = await createUser(prefix);
  users.push(created.username);
  return created;
}

/** Users whose statements hold every slot between them (see slotFillers). */
async function fillers(prefix: string) {
  const made = await slotFillers(prefix);
  users.push(...made.users.map((u) => u.username));
  return made;
}

/** How many of the fillers' queries are in `state`. */
async function fillersIn(made: { users: { token: string }[] }, state: string): Promise<number> {
  const lists = await Promise.all(made.users.map((u) => queriesIn(u.token, state)));
  return lists.reduce((n, list) => n + list.length, 0);
}

/** Starts an execute request without waiting for it; the response comes in the promise. */
function start(body: unknown, token: string, baseUrl?: string) {
  return execute(body, { token, baseUrl });
}

/** The query ids of a user's queries in a state, as GET /v1/queries lists them. */
async function queriesIn(
  token: string,
  state: string,
): Promise<{ query_id: string; queue_position: number | null }[]> {
  const res = await request(undefined, { method: 'GET', path: '/v1/queries', token });
  expect(res.status).toBe(200);
  return (res.json as { query_id: string; state: string; queue_position: number | null }[]).filter(
    (q) => q.state === state,
  );
}

describe('query resources', () => {
  it('shows a finished query with its owner, state, timings, rows and bytes — from every api', async () => {
    const token = await login();
    const res = await execute({ statement: 'select g from generate_series(1, 42) g' }, { token });
    const id = res.json.query_id as string;
    for (const baseUrl of e2eEnv().baseUrls) {
      const info = await eventually(async () => {
        const got = await request(undefined, {
          method: 'GET',
          path: `/v1/queries/${id}`,
          token,
          baseUrl,
        });
        return got.json?.state === 'succeeded' ? got : undefined;
      });
      expect(info.status).toBe(200);
      expect(info.json).toMatchObject({
        query_id: id,
        owner: e2eEnv().adminUser,
        state: 'succeeded',
        rows: 42,
        bytes: expect.any(Number),
        created_at: expect.any(String),
        finished_at: expect.any(String),
        status: { sql_state: '00000', vendor_code: 0 },
      });
      expect(info.json.bytes).toBeGreaterThan(0);
      expect(info.json.statement).toBe('select g from generate_series(1, 42) g');
    }
    const list = await request(undefined, { method: 'GET', path: '/v1/queries', token });
    expect((list.json as { query_id: string }[]).map((q) => q.query_id)).toContain(id);
  });

  it('shows when a query began streaming: after its statement ran, before its end', async () => {
    const { token } = await user('e2e_streaming_at');
    // Its first row comes after 0.3 s of the statement; the rest follow, 0.1 s apart.
    const res = await execute(
      {
        statement:
          'select g, pg_sleep(case when g = 1 then 0.3 else 0.1 end) from generate_series(1, 4) g',
        fetch_size: 1,
      },
      { token },
    );
    expect(res.status).toBe(200);
    const id = res.json.query_id as string;
    const info = await eventually(async () => {
      const got = await request(undefined, { method: 'GET', path: `/v1/queries/${id}`, token });
      return got.json?.state === 'succeeded' ? (got.json as Record<string, string>) : undefined;
    });
    const [started, streaming, finished] = [
      info.started_at,
      info.streaming_at,
      info.finished_at,
    ].map((at) => Date.parse(at));
    expect(streaming - started).toBeGreaterThanOrEqual(250);
    expect(finished - streaming).toBeGreaterThanOrEqual(250);
    // A statement that fails before any row never streams.
    const failed = await execute({ statement: 'select * from no_such_table_streaming' }, { token });
    expect(failed.status).toBe(400);
    const never = await request(undefined, {
      method: 'GET',
      path: `/v1/queries/${failed.json.query_id as string}`,
      token,
    });
    expect(never.json).toMatchObject({ state: 'failed', streaming_at: null });
  });

  it('keeps a long statement whole for the query, and lists its first 200 characters', async () => {
    const { token } = await user('e2e_whole_statement');
    const statement = `select 1 as n -- ${'é'.repeat(300)} end`;
    const res = await execute({ statement }, { token });
    expect(res.status).toBe(200);
    const id = res.json.query_id as string;
    const one = await request(undefined, { method: 'GET', path: `/v1/queries/${id}`, token });
    expect(one.json.statement).toBe(statement);
    const list = await request(undefined, { method: 'GET', path: '/v1/queries', token });
    const listed = (list.json as { query_id: string; statement: string }[]).find(
      (q) => q.query_id === id,
    );
    expect(listed?.statement).toBe(statement.slice(0, 200));
  });

  // MONITOR sees one node: the default run's single Redis (cluster mode).
  if (e2eEnv().mode === 'cluster' && e2eEnv().redisKind === 'single') {
    it("records a query's end once, in the script that appends its stream's last entry", async () => {
      const token = await login();
      const { seen, stop } = await monitorRedis();
      try {
        const res = await execute(
          { statement: 'select g from generate_series(1, 3) g' },
          { token },
        );
        expect(res.status).toBe(200);
        // Long enough for whatever the worker's main thread would still send after the answer.
        await new Promise((resolve) => setTimeout(resolve, 500));
        const id = res.json.query_id as string;
        const meta = `${e2eEnv().keyPrefix}:q:{${id}}:meta`;
        const out = `${e2eEnv().keyPrefix}:q:{${id}}:out`;
        // A final transition names the states it may leave; neither the api nor the worker's
        // main thread sends one of their own.
        const isEnd = (e: { args: string[] }) =>
          e.args.includes(meta) && e.args.includes(',queued,running,streaming,');
        expect(seen.filter(isEnd)).toHaveLength(1);
        // When it began streaming goes with its end, in that same call: no write of its own.
        const scripts = seen.filter((e) => e.command.startsWith('eval') && e.args.includes(meta));
        expect(scripts.filter((e) => e.args.includes('streamingAt'))).toEqual([seen.find(isEnd)]);
        // That call appends the last entry, then moves the record (a script runs whole or not).
        const call = seen.find(isEnd)!;
        expect(call.args).toContain(out);
        const ran = seen.slice(seen.indexOf(call) + 1).filter((e) => e.source === 'lua');
        const entry = ran.findIndex((e) => e.command === 'xadd' && e.args[1] === out);
        const moved = ran.findIndex((e) => e.command === 'hset' && e.args[1] === meta);
        expect(entry).toBeGreaterThanOrEqual(0);
        expect(ran[entry].args).toContain('end');
        expect(moved).toBeGreaterThan(entry);
      } finally {
        await stop();
      }
    });
  }

  it('lists your queries newest first', async () => {
    const { token } = await user('e2e_order');
    const sent: string[] = [];
    for (const n of [1, 2, 3]) {
      const res = await execute({ statement: `select ${n} as n` }, { token });
      expect(res.status).toBe(200);
      sent.push(res.json.query_id as string);
    }
    const list = await request(undefined, { method: 'GET', path: '/v1/queries', token });
    expect(list.status).toBe(200);
    const listed = list.json as { query_id: string; created_at: string }[];
    expect(listed.map((q) => q.query_id)).toEqual([...sent].reverse());
    const times = listed.map((q) => Date.parse(q.created_at));
    expect(times).toEqual([...times].sort((a, b) => b - a));
  });

  it("answers 404 for another user's query, and lists only your own", async () => {
    const admin = await login();
    const res = await execute({ statement: 'select 1' }, { token: admin });
    const other = await user('e2e_other');
    const got = await request(undefined, {
      method: 'GET',
      path: `/v1/queries/${res.json.query_id}`,
      token: other.token,
    });
    expect(got.status).toBe(404);
    expect(got.json.status.vendor_code).toBe(-104);
    const del = await request(undefined, {
      method: 'DELETE',
      path: `/v1/queries/${res.json.query_id}`,
      token: other.token,
    });
    expect(del.status).toBe(404);
    const list = await request(undefined, {
      method: 'GET',
      path: '/v1/queries',
      token: other.token,
    });
    expect(list.json).toEqual([]);
  });

  it('cancels a running statement with DELETE, from another api than the one streaming it', async () => {
    const { token } = await user('e2e_cancel');
    const [first, second] = [e2eEnv().baseUrls[0], e2eEnv().baseUrls[e2eEnv().baseUrls.length - 1]];
    const pending = start({ statement: 'select pg_sleep(30)' }, token, first);
    const [running] = await eventually(async () => {
      const list = await queriesIn(token, 'running');
      return list.length > 0 ? list : undefined;
    });
    await eventually(async () => ((await backendsOf(running.query_id)) === 1 ? true : undefined));
    const started = Date.now();
    const del = await request(undefined, {
      method: 'DELETE',
      path: `/v1/queries/${running.query_id}`,
      token,
      baseUrl: second,
    });
    expect(del.status).toBe(200);
    const res = await pending;
    expect(Date.now() - started).toBeLessThan(5000);
    expect(res.status).toBe(409);
    expect(res.json).toEqual({
      query_id: running.query_id,
      status: expect.objectContaining({ sql_state: '57014', vendor_code: -900 }),
    });
    await eventually(async () => ((await backendsOf(running.query_id)) === 0 ? true : undefined));
    const info = await request(undefined, {
      method: 'GET',
      path: `/v1/queries/${running.query_id}`,
      token,
    });
    expect(info.json.state).toBe('cancelled');
  });

  it('shows a queued query with its position, and cancels it before it runs', async () => {
    const busy = await fillers('e2e_busy');
    const waiter = await user('e2e_waiter');
    const { capacity } = e2eEnv();
    // Every slot held until the waiter's query is cancelled: they wait on a lock the test holds.
    const lock = await holdLock();
    const sleepers = Array.from({ length: capacity }, (_, i) =>
      start({ statement: `select 1 from ${lock.waitOn}` }, busy.tokenFor(i)),
    );
    try {
      await eventually(async () =>
        (await fillersIn(busy, 'running')) === capacity ? true : undefined,
      );
      const pending = start({ statement: 'select 1 as never_run' }, waiter.token);
      const [queued] = await eventually(async () => {
        const list = await queriesIn(waiter.token, 'queued');
        return list.length > 0 ? list : undefined;
      });
      expect(queued.queue_position).toBe(0);
      const del = await request(undefined, {
        method: 'DELETE',
        path: `/v1/queries/${queued.query_id}`,
        token: waiter.token,
      });
      expect(del.json.state).toBe('cancelled');
      const res = await pending;
      expect(res.status).toBe(409);
      expect(res.json.status.vendor_code).toBe(-900);
    } finally {
      await lock.release();
    }
    for (const s of await Promise.all(sleepers)) expect(s.status).toBe(200);
  });
});

describe('cancel on client disconnect', () => {
  it('cancels the statement in PostgreSQL when the client goes away', async () => {
    const { token, username } = await user('e2e_leaver');
    const url = new URL('/v1/execute', e2eEnv().baseUrl);
    const req = httpRequest(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    });
    req.on('error', () => undefined);
    req.end(JSON.stringify({ statement: 'select pg_sleep(30)' }));
    const [running] = await eventually(async () => {
      const list = await queriesIn(token, 'running');
      return list.length > 0 ? list : undefined;
    });
    await eventually(async () => ((await backendsOf(running.query_id)) === 1 ? true : undefined));
    req.destroy();
    await eventually(
      async () => ((await backendsOf(running.query_id)) === 0 ? true : undefined),
      5000,
    );
    const info = await eventually(async () => {
      const got = await request(undefined, {
        method: 'GET',
        path: `/v1/queries/${running.query_id}`,
        token,
      });
      return got.json.state === 'cancelled' ? got : undefined;
    });
    expect(info.json.owner).toBe(username);
  });
});

describe('time limits', () => {
  it('answers 504 with -1122 when the statement runs past its timeout', async () => {
    const { token } = await user('e2e_slow');
    const started = Date.now();
    const res = await execute({ statement: 'select pg_sleep(10)', timeout: 500 }, { token });
    expect(Date.now() - started).toBeLessThan(5000);
    expect(res.status).toBe(504);
    expect(res.json.status).toEqual({
      reason: expect.stringMatching(/time limit/),
      sql_state: '57014',
      vendor_code: -1122,
    });
    await eventually(async () => ((await backendsOf(res.json.query_id)) === 0 ? true : undefined));
  });

  it('answers 504 when a query waits in the queue longer than the limit', async () => {
    const busy = await fillers('e2e_hog');
    const late = await user('e2e_late');
    const { capacity } = e2eEnv();
    // The e2e service runs with SLUICE_MAX_QUEUE_WAIT_MS=4000. The slots stay taken until the late
    // query is answered (they wait on a lock the test holds), so that it waits past 4 s however
    // long all of them took to start (CI once saw 200 with 6 s sleeps: a slow start left the late
    // query less than 4 s to wait).
    const lock = await holdLock();
    const sleepers = Array.from({ length: capacity }, (_, i) =>
      start({ statement: `select 1 from ${lock.waitOn}` }, busy.tokenFor(i)),
    );
    try {
      await eventually(async () =>
        (await fillersIn(busy, 'running')) === capacity ? true : undefined,
      );
      const res = await execute({ statement: 'select 1' }, { token: late.token });
      expect(res.status).toBe(504);
      expect(res.json.status).toMatchObject({ sql_state: '57014', vendor_code: -1122 });
      expect(res.json.status.reason).toMatch(/queue/);
    } finally {
      await lock.release();
    }
    await Promise.all(sleepers);
  });
});

describe('admission', () => {
  it('answers 429 with Retry-After past the per-user cap of queued and running queries', async () => {
    const { token } = await user('e2e_greedy');
    // The e2e service runs with SLUICE_MAX_ACTIVE_PER_USER=6. The six wait on a lock the test
    // holds, so all six are open at once even when the first statements of a new user's login
    // role start slowly.
    const lock = await holdLock();
    const statement = `select 1 from ${lock.waitOn}`;
    const sleepers = Array.from({ length: 6 }, () => start({ statement }, token));
    try {
      await eventually(async () => {
        const list = await request(undefined, { method: 'GET', path: '/v1/queries', token });
        const open = (list.json as { state: string }[]).filter((q) =>
          ['queued', 'running', 'streaming'].includes(q.state),
        );
        return open.length === 6 ? true : undefined;
      });
      const res = await execute({ statement: 'select 1 as refused' }, { token });
      expect(res.status).toBe(429);
      expect(res.headers.get('retry-after')).toBe('1');
      expect(res.json.status).toMatchObject({ sql_state: '53000', vendor_code: -108 });
      // The refused query left no record behind: only the six are listed.
      const list = await request(undefined, { method: 'GET', path: '/v1/queries', token });
      const statements = (list.json as { statement: string }[]).map((q) => q.statement);
      expect(statements).toEqual(Array(6).fill(statement));
    } finally {
      await lock.release();
    }
    await Promise.all(sleepers);
    const after = await execute({ statement: 'select 1 as ok' }, { token });
    expect(after.status).toBe(200);
  });

  it('never refuses a user at the cap who sends each next query as soon as an answer comes', async () => {
    const { token } = await user('e2e_eager');
    // Six loops: every slot of the cap (SLUICE_MAX_ACTIVE_PER_USER=6) taken, and each freed by
    // an answer the next request of its loop follows at once — in cluster mode to the other api
    // (requests alternate between the two), whose admission must find the slot free.
    const loops = Array.from({ length: 6 }, async () => {
      const statuses: number[] = [];
      for (let i = 0; i < 15; i++) {
        statuses.push((await execute({ statement: 'select 1 as n' }, { token })).status);
      }
      return statuses;
    });
    expect((await Promise.all(loops)).flat()).toEqual(Array(90).fill(200));
  });

  it("starts another user's query before the flooding users' queued ones", async () => {
    const flooders = await fillers('e2e_flood');
    const other = await user('e2e_fair');
    const { capacity } = e2eEnv();
    // Three each: every slot taken (each user holds its share), one of each user's waits.
    // Of different lengths, so that the running ones free their slots one at a time (0.3 s
    // apart): each free slot goes to the best-placed waiting query, one by one.
    const floodSize = 3 * flooders.users.length;
    const tokenOf = (i: number) => flooders.users[i % flooders.users.length].token;
    const flood = Array.from({ length: floodSize }, (_, i) =>
      start({ statement: `select pg_sleep(${1 + i * 0.3})` }, tokenOf(i)),
    );
    await eventually(async () =>
      (await fillersIn(flooders, 'running')) === capacity ? true : undefined,
    );
    expect(await fillersIn(flooders, 'queued')).toBe(floodSize - capacity);
    const res = await execute({ statement: 'select 1 as mine' }, { token: other.token });
    expect(res.status).toBe(200);
    const mine = await request(undefined, {
      method: 'GET',
      path: `/v1/queries/${res.json.query_id}`,
      token: other.token,
    });
    const listed = await Promise.all(
      flooders.users.map(async ({ token }) => {
        const list = await request(undefined, { method: 'GET', path: '/v1/queries', token });
        return (list.json as { query_id: string }[]).map((q) => ({ id: q.query_id, token }));
      }),
    );
    await Promise.all(flood);
    const floodStarts = (
      await Promise.all(
        listed
          .flat()
          .map(({ id, token }) =>
            request(undefined, { method: 'GET', path: `/v1/queries/${id}`, token }),
          ),
      )
    ).map((r) => Date.parse(r.json.started_at as string));
    // The flood's queued queries started last; the other user's one query took the first slot
    // that came free, before either of them.
    const [firstQueuedFloodStart] = floodStarts.sort((a, b) => a - b).slice(capacity);
    expect(Date.parse(mine.json.started_at as string)).toBeLessThan(firstQueuedFloodStart);
  });

  it("keeps a slot of every worker's from one user's long statements: another user's query starts at once", async () => {
    const hog = await user('e2e_long');
    const other = await user('e2e_next');
    // Alone, the hog holds every slot of a worker's but one.
    const { capacity, userSlotsAlone: userSlots } = e2eEnv();
    // Enough to take every slot, were one user allowed to; each runs 10 s unless stopped.
    const long = Array.from({ length: capacity }, () =>
      start({ statement: 'select pg_sleep(30)', timeout: 10_000 }, hog.token),
    );
    await eventually(async () => {
      const running = (await queriesIn(hog.token, 'running')).length;
      const queued = await queriesIn(hog.token, 'queued');
      return running === userSlots && queued.length === capacity - userSlots ? queued : undefined;
    });
    const asked = Date.now();
    const res = await execute({ statement: 'select 1 as mine' }, { token: other.token });
    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([[1]]);
    // SLUICE_MAX_QUEUE_WAIT_MS is 4 s: waiting for one of the long statements would be a 504.
    expect(Date.now() - asked).toBeLessThan(2000);
    // The long statements past the share still wait, each with its place in the queue (but for
    // the moments, every 250 ms, when a worker takes one to put it off again).
    const queued = await eventually(async () => {
      const list = await queriesIn(hog.token, 'queued');
      return list.every((q) => typeof q.queue_position === 'number') ? list : undefined;
    }, 2000);
    expect(queued).toHaveLength(capacity - userSlots);
    expect(await queriesIn(hog.token, 'running')).toHaveLength(userSlots);
    // Stopped: the waiting ones first, so that none of them takes a slot the others free.
    const open = [...queued, ...(await queriesIn(hog.token, 'running'))];
    for (const q of open) {
      const path = `/v1/queries/${q.query_id}`;
      await request(undefined, { method: 'DELETE', path, token: hog.token });
    }
    // Cancelled (409), or out of the queue at its wait limit (504): every one answered.
    for (const answer of await Promise.all(long)) expect([409, 504]).toContain(answer.status);
  });
});
