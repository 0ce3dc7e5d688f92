// What role isolation by login costs: each user role runs over a login role of its own, made on
// first use and pooled per worker thread. For ROLES new roles, one user each, it times through
// Sluice (one api + one worker, loopback):
//   cold   — the role's first statement: the worker has no login role for it yet (users added
//            straight into sluice.users), so it is created (CREATE ROLE, GRANT) and connected;
//   warm   — a later statement of the same user, once each thread has a pooled connection of
//            that login (pools are per thread);
// and, as floors, the same `select 1` straight over pg: a new connection as the login role
// (connect + query + end), and a query on an open one. Prints medians and p90s.
//
//   npm run build && node bench/login-roles.mjs        # about 20 s
import { randomBytes, randomUUID, createHmac } from 'node:crypto';
import pg from 'pg';
import {
  DATABASE_URL,
  envInt,
  installGuards,
  jsonRequest,
  machineDescription,
  median,
  ms,
  onCleanup,
  percentile,
  runMain,
  startSluice,
} from './lib/service.mjs';

const ROLES = envInt('BENCH_ROLES', 40);

function token(secret, claims) {
  const enc = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const head = enc({ alg: 'HS256', typ: 'JWT' });
  const body = enc(claims);
  const sig = createHmac('sha256', secret).update(`${head}.${body}`).digest('base64url');
  return `${head}.${body}.${sig}`;
}

async function timed(work) {
  const started = process.hrtime.bigint();
  await work();
  return Number(process.hrtime.bigint() - started) / 1e6;
}

const summary = (name, values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return `| ${name} | ${ms(median(sorted))} | ${ms(percentile(sorted, 90))} |`;
};

async function main() {
  installGuards(120_000);
  const sluice = await startSluice();
  const db = new pg.Client({ connectionString: DATABASE_URL });
  await db.connect();
  onCleanup(() => db.end());
  const tag = randomBytes(3).toString('hex');
  const roles = Array.from({ length: ROLES }, (_, i) => `bench_lr_${tag}_${i}`);
  onCleanup(async () => {
    await db.query('DELETE FROM sluice.users WHERE role = ANY($1)', [roles]);
    for (const role of roles) {
      const { rows } = await db.query(
        `SELECT u.rolname FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid
           JOIN pg_roles u ON u.oid = m.member WHERE r.rolname = $1 AND u.rolcanlogin`,
        [role],
      );
      for (const { rolname } of rows) await db.query(`DROP ROLE IF EXISTS "${rolname}"`);
      await db.query(`DROP ROLE IF EXISTS ${role}`);
    }
  });
  for (const role of roles) await db.query(`CREATE ROLE ${role} NOLOGIN`);
  await db.query(
    `INSERT INTO sluice.users (username, password_hash, role, token_generation)
     SELECT r, 'unused', r, 'gen' FROM unnest($1::text[]) r`,
    [roles],
  );
  const now = Math.floor(Date.now() / 1000);
  const secret = sluice.env.SLUICE_JWT_SECRET;
  const run = (role) =>
    jsonRequest(
      new URL('/v1/execute', sluice.baseUrl),
      { statement: 'select 1' },
      {
        authorization: `Bearer ${token(secret, { sub: role, role, jti: randomUUID(), gen: 'gen', iat: now, exp: now + 600 })}`,
      },
    ).then((res) => {
      if (res.status !== 200) throw new Error(`HTTP ${res.status} ${res.body}`);
    });
  const cold = [];
  const warm = [];
  for (const role of roles) {
    cold.push(await timed(() => run(role)));
    // Each thread keeps its own pools: let every thread of the worker connect once first.
    for (let i = 0; i < 4; i++) await run(role);
    warm.push(await timed(() => run(role)));
  }
  // The same request path with nothing new about the login: one user, many statements.
  const hot = [];
  for (let i = 0; i < ROLES; i++) hot.push(await timed(() => run(roles[0])));
  // Floors: the login role Sluice made, straight over pg.
  const { rows } = await db.query(
    `SELECT u.rolname FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid
       JOIN pg_roles u ON u.oid = m.member WHERE r.rolname = $1 AND u.rolcanlogin`,
    [roles[0]],
  );
  const loginUrl = new URL(DATABASE_URL);
  loginUrl.username = rows[0].rolname; // trust auth on the bench machine; Sluice's own test uses SCRAM
  const connectFloor = [];
  const queryFloor = [];
  const open = new pg.Client({ connectionString: loginUrl.toString() });
  await open.connect();
  for (let i = 0; i < ROLES; i++) {
    connectFloor.push(
      await timed(async () => {
        const c = new pg.Client({ connectionString: loginUrl.toString() });
        await c.connect();
        await c.query('select 1');
        await c.end();
      }),
    );
    queryFloor.push(await timed(() => open.query('select 1')));
  }
  await open.end();
  console.log(`\n### Login roles (${ROLES} new roles, one statement each, then again)\n`);
  console.log(machineDescription());
  console.log('\n| path | p50 ms | p90 ms |\n|---|---|---|');
  console.log(summary('Sluice, first statement of a new role (login role made, connected)', cold));
  console.log(summary('Sluice, a later statement of that role (pooled login)', warm));
  console.log(summary(`Sluice, one role's ${ROLES} statements in a row`, hot));
  console.log(summary('floor: new pg connection as the login role + select 1', connectFloor));
  console.log(summary('floor: select 1 on an open connection', queryFloor));
}

await runMain(main);
