import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RedisClient } from './redis.connector';

/** A Lua script on a connection: called by EVALSHA, sent in full only when Redis lacks it. */
export type Script = (...keysThenArgs: (string | Buffer)[]) => Promise<unknown>;

/**
 * A script: its Lua and its number of keys (0: the caller gives the number first, for a script
 * over a batch of keys).
 */
export type ScriptDefinition = readonly [lua: string, numberOfKeys?: number];

/** Where the scripts are: one a file, BullMQ's way (see scripts/README.md). */
export const SCRIPTS_DIR = join(__dirname, 'scripts');

/** A line that stands for a file of scripts/includes, as BullMQ's scripts include theirs. */
const INCLUDE = /^--- @include "([^"]+)"$/gm;

/** The scripts read so far, by name. */
const read = new Map<string, ScriptDefinition>();

/**
 * The script `name` of scripts/ (`admitSlot-1`: the file admitSlot-1.lua, one key; a name with
 * no key count is a script the caller gives the number of keys to), its includes in place.
 */
export function scriptFile(name: string): ScriptDefinition {
  let script = read.get(name);
  if (script === undefined) {
    const keys = /-(\d+)$/.exec(name);
    script = [withIncludes(name, []), keys ? Number(keys[1]) : 0];
    read.set(name, script);
  }
  return script;
}

/** The text of scripts/`name`.lua, each include line replaced by its file's text. */
function withIncludes(name: string, within: readonly string[]): string {
  if (within.includes(name)) {
    throw new Error(`Lua script ${within[0]}: ${name} includes itself`);
  }
  const lua = readFileSync(join(SCRIPTS_DIR, `${name}.lua`), 'utf8');
  return lua.replace(INCLUDE, (_, included: string) =>
    withIncludes(included, [...within, name]).replace(/\n$/, ''),
  );
}

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
