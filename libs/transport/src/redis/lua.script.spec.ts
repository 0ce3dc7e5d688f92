import Redis from 'ioredis';
import { createHash, randomBytes } from 'node:crypto';
import { testRedisUrl } from '@test/settings';
import { luaScript } from './lua.script';

let redis: Redis;

beforeAll(() => {
  redis = new Redis(testRedisUrl, { maxRetriesPerRequest: 1 });
});

afterAll(async () => {
  await redis.quit();
});

/** A script Redis has never seen: its text carries a comment of its own. */
const fresh = (body: string) => `-- ${randomBytes(8).toString('hex')}\n${body}`;

describe('luaScript', () => {
  it('runs a script Redis lacks (NOSCRIPT: sent whole), then by its digest', async () => {
    const lua = fresh('return {KEYS[1], ARGV[1]}');
    const script = luaScript(redis, [lua]);
    expect(await script('k', 'v')).toEqual(['k', 'v']);
    // Redis keeps what EVAL ran: it answers the digest from now on.
    const digest = createHash('sha1').update(lua).digest('hex');
    expect(await redis.script('EXISTS', digest)).toEqual([1]);
    expect(await script('k2', 'v2')).toEqual(['k2', 'v2']);
  });

  it('takes the number of keys first when defined with none', async () => {
    const script = luaScript(redis, [fresh('return {#KEYS, #ARGV}'), 0]);
    expect(await script('2', 'a', 'b', 'x')).toEqual([2, 1]);
  });

  it("throws the script's own error, not a retry of it", async () => {
    const script = luaScript(redis, [fresh("return redis.error_reply('refused here')")]);
    await expect(script('k')).rejects.toThrow('refused here');
  });
});
