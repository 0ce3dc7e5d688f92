import Redis from 'ioredis';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { testRedisUrl } from '@test/settings';
import { SCRIPTS_DIR, luaScript, scriptFile } from './lua.script';

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

/** The scripts of scripts/ (not its includes), by name. */
const scriptNames = readdirSync(SCRIPTS_DIR)
  .filter((file) => file.endsWith('.lua'))
  .map((file) => file.slice(0, -'.lua'.length));

describe('scriptFile', () => {
  it('reads every script with its includes in place, and Redis compiles each one', async () => {
    expect(scriptNames.length).toBeGreaterThan(10);
    for (const name of scriptNames) {
      const [lua] = scriptFile(name);
      expect(lua).not.toContain('@include');
      // SCRIPT LOAD compiles without running: a syntax error of any script fails here.
      const digest = (await redis.script('LOAD', lua)) as string;
      expect(digest).toBe(createHash('sha1').update(lua).digest('hex'));
    }
  });

  it("takes the number of keys from the name, none from a batch script's", () => {
    expect(scriptFile('admitSlot-1')[1]).toBe(1);
    expect(scriptFile('reserveKept-5')[1]).toBe(5);
    expect(scriptFile('appendEntries')[1]).toBe(0);
  });

  it('puts an include where its line is, once, and runs it', async () => {
    const [lua] = scriptFile('moveRecord-1');
    const included = readFileSync(join(SCRIPTS_DIR, 'includes', 'moveQuery.lua'), 'utf8');
    expect(lua.split('local function moveQuery(').length).toBe(2);
    expect(lua).toContain(included.trimEnd());
    // No record: moveQuery answers nothing and writes nothing.
    const meta = `lua-spec:${randomBytes(6).toString('hex')}`;
    const move = luaScript(redis, scriptFile('moveRecord-1'));
    expect(await move(meta, ',queued,', '0', '1', 'state', 'running')).toEqual([]);
    expect(await redis.exists(meta)).toBe(0);
  });

  it('opens each script with a header that lists its keys and arguments', () => {
    for (const name of scriptNames) {
      const header = readFileSync(join(SCRIPTS_DIR, `${name}.lua`), 'utf8').split('\n\n')[0];
      expect(header.split('\n').every((line) => line.startsWith('--'))).toBe(true);
      const keys = /-(\d+)$/.exec(name);
      for (let k = 1; k <= Number(keys?.[1] ?? 0); k++) {
        if (!header.includes(`KEYS[${k}]`)) expect(header).toMatch(/KEYS\[1\.\.\d\]/);
      }
      expect(header).toMatch(/ARGV\[/);
    }
  });

  it('is copied into dist/ by the build, beside the compiled adapters', () => {
    const build = (
      JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: { build: string } }
    ).scripts.build;
    const from = relative(process.cwd(), SCRIPTS_DIR);
    expect(build).toContain(`cp -R ${from} dist/${from}`);
  });
});
