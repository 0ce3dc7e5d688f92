import { randomUUID } from 'node:crypto';
import { closeDb, db, e2eEnv } from './support/client';
import { grantToControl } from './support/roles';
import { randomName } from './support/service';
import { dropRole, executeAs, signToken } from './support/users';

/**
 * Every user role gets a login role of its own, and each worker keeps a pool per (login,
 * database): 200 roles must still not mean 200 × threads × pool-size connections.
 */
const ROLES = 200;
const prefix = randomName('e2e_many');
const roles = Array.from({ length: ROLES }, (_, i) => `${prefix}_${i}`);
const users = roles.map((r) => `${r}_user`);

/** Connections PostgreSQL has open for this spec's login roles. */
async function openConnections(): Promise<number> {
  const { rows } = await db().query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename ~ $1`,
    [`^sluice_[0-9a-f]{10}_${prefix}_`],
  );
  return rows[0].n;
}

async function gauge(url: string, name: string): Promise<number> {
  const text = await (await fetch(url)).text();
  // The processes add default labels (app="worker"): `name{…} value`.
  const line = text.split('\n').find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  if (!line) throw new Error(`${name} is not in ${url}`);
  return Number(line.split(' ').at(-1));
}

beforeAll(async () => {
  const client = await db().connect();
  try {
    for (const role of roles) {
      await client.query(`CREATE ROLE ${role} NOLOGIN`);
      await grantToControl(client, role, e2eEnv().controlRole);
    }
  } finally {
    client.release();
  }
  // Straight into the users table, as an operator's script would: the workers create each
  // login role on first use.
  await db().query(
    `INSERT INTO sluice.users (username, password_hash, role, token_generation)
     SELECT u, 'unused', r, 'gen' FROM unnest($1::text[], $2::text[]) AS t(u, r)`,
    [users, roles],
  );
}, 120_000);

afterAll(async () => {
  await db().query('DELETE FROM sluice.users WHERE username = ANY($1)', [users]);
  for (const role of roles) await dropRole(role);
  await closeDb();
}, 120_000);

describe('connections to PostgreSQL', () => {
  it(`stays under the cap with ${ROLES} roles, each running as its own`, async () => {
    const env = e2eEnv();
    const cap = env.pgMaxConnections * env.poolMetricsUrls.length;
    const now = Math.floor(Date.now() / 1000);
    let peak = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        peak = Math.max(peak, await openConnections());
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    let next = 0;
    const seen: string[] = [];
    const run = async () => {
      while (next < ROLES) {
        const i = next++;
        const token = signToken(
          {
            sub: users[i],
            role: roles[i],
            jti: randomUUID(),
            gen: 'gen',
            iat: now,
            exp: now + 600,
          },
          env.jwtSecret,
        );
        const res = await executeAs(token, {
          statement: 'select current_user, session_user <> current_user',
        });
        expect(res.status).toBe(200);
        seen[i] = res.json.data[0][0];
        expect(res.json.data[0][1]).toBe(true);
      }
    };
    try {
      await Promise.all(Array.from({ length: 8 }, run));
    } finally {
      sampling = false;
      await sampler;
    }
    expect(seen).toEqual(roles);
    expect(peak).toBeGreaterThan(0);
    expect(peak).toBeLessThanOrEqual(cap);
    expect(await openConnections()).toBeLessThanOrEqual(cap);
    // The processes count the same connections, under the same cap.
    for (const url of env.poolMetricsUrls) {
      const open = await gauge(url, 'sluice_pg_connections');
      expect(open).toBeGreaterThan(0);
      expect(open).toBeLessThanOrEqual(env.pgMaxConnections);
      expect(await gauge(url, 'sluice_pg_max_connections')).toBe(env.pgMaxConnections);
    }
  }, 180_000);
});
