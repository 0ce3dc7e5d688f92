import { createHash } from 'node:crypto';
import type { RedisClient } from './redis.connector';

/** A Lua script on a connection: called by EVALSHA, sent in full only when Redis lacks it. */
export type Script = (...keysThenArgs: (string | Buffer)[]) => Promise<unknown>;

/**
 * A script: its Lua and its number of keys (0: the caller gives the number first, for a script
 * over a batch of keys).
 */
export type ScriptDefinition = readonly [lua: string, numberOfKeys?: number];

/** Digests of the scripts seen, by their text: a script made for each query is not hashed each time. */
const digests = new Map<string, string>();

function digestOf(lua: string): string {
  let sha = digests.get(lua);
  if (sha === undefined) {
    sha = createHash('sha1').update(lua).digest('hex');
    digests.set(lua, sha);
  }
  return sha;
}

/**
 * `lua` on `redis`, as EVALSHA, then EVAL when Redis answers NOSCRIPT (a restart, a failover).
 * Not ioredis's defineCommand: ioredis copies every script defined on a connection into each
 * MULTI and each auto-pipelined batch it builds, two properties a script, tens of µs a batch
 * with a dozen scripts — and a script defined after a batch was begun is missing from it.
 * EVALSHA is a plain command: a batch carries it like any other.
 */
export function luaScript(redis: RedisClient, [lua, numberOfKeys = 1]: ScriptDefinition): Script {
  const sha = digestOf(lua);
  return async (...args) => {
    const sent: (string | number | Buffer)[] = numberOfKeys > 0 ? [numberOfKeys, ...args] : args;
    try {
      return await redis.evalsha(sha, ...(sent as [number, ...string[]]));
    } catch (err) {
      if (!(err instanceof Error) || !err.message.includes('NOSCRIPT')) throw err;
      return redis.eval(lua, ...(sent as [number, ...string[]]));
    }
  };
}

/** The scripts of `table` on `redis`, by name. */
export function luaScripts<Name extends string>(
  redis: RedisClient,
  table: Readonly<Record<Name, ScriptDefinition>>,
): Record<Name, Script> {
  const scripts = {} as Record<Name, Script>;
  for (const name of Object.keys(table) as Name[]) scripts[name] = luaScript(redis, table[name]);
  return scripts;
}
