/**
 * Lua: `moveQuery(meta, at)` moves a query's record if its state is one it may move from, and
 * returns the hash as it is then (or nothing). ARGV from `at`: the states it may be in, as
 * `,a,b,`; the retention in seconds, 0 to keep the TTL; '1' to read the hash back, '0' not to;
 * field, value, … Shared by the records' transition and the result writer's append, which
 * records a query's end with its stream's last entry.
 */
export const MOVE_QUERY_FUNCTION = `
local function moveQuery(meta, at)
  local state = redis.call('HGET', meta, 'state')
  if not state then return {} end
  if string.find(ARGV[at], ',' .. state .. ',', 1, true) then
    redis.call('HSET', meta, unpack(ARGV, at + 3))
    if ARGV[at + 1] ~= '0' then redis.call('EXPIRE', meta, ARGV[at + 1]) end
  end
  if ARGV[at + 2] == '0' then return {} end
  return redis.call('HGETALL', meta)
end`;

/** A move of a query's record, as moveQuery takes it: the record's key and its ARGV. */
export interface QueryMove {
  meta: string;
  args: string[];
}
