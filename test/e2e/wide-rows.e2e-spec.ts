import { createUser, execute, usersDroppedAfterAll } from './support/client';

/**
 * A read of `fetch_size` rows is held whole in a worker thread: wide rows at a large fetch_size
 * once exhausted the thread's heap, and the thread died with every statement on it, other users'
 * included. One read now holds at most 64 MiB of rows (one row always fits).
 */
const users = usersDroppedAfterAll();
let token: string;

beforeAll(async () => {
  const user = await createUser('wide_rows');
  users.push(user.username);
  token = user.token;
});

it('refuses a read of rows past the bound with 413, and the worker goes on', async () => {
  // 1000 rows of 200 kB at the default fetch_size: 200 MB in one read.
  const res = await execute(
    { statement: "select repeat('x', 200000) from generate_series(1, 1000)" },
    { token },
  );
  expect(res.status).toBe(413);
  expect(res.json).toMatchObject({ status: { vendor_code: -112 } });
  expect(res.json.status.reason).toContain('fetch_size');
  const after = await execute({ statement: 'select 42 as n' }, { token });
  expect(after.json.data).toEqual([[42]]);
}, 60_000);

it('streams wide rows whole, fewer a read once their width is known', async () => {
  const res = await execute(
    {
      statement: "select g, repeat('x', 2000000) as pad from generate_series(1, 50) g",
      fetch_size: 30,
    },
    { token, headers: { accept: 'application/stream+json' } },
  );
  expect(res.status).toBe(200);
  const lines = res.text
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { data?: unknown[][]; status?: unknown });
  const rows = lines.flatMap((line) => line.data ?? []);
  expect(rows.map((row) => row[0])).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
  expect(lines[lines.length - 1].status).toMatchObject({ vendor_code: 0, row_count: 50 });
}, 60_000);
