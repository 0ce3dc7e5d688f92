-- moveQuery(meta, at): moves a query's record if its state is one it may move from, and returns
-- the hash as it is then (or {}). Shared by moveRecord-1 and appendEntries, which records a
-- query's end with its stream's last entry.
--
-- ARGV[at] the states it may be in, as ',a,b,'
-- ARGV[at + 1] the record's retention (s), 0 to keep its TTL
-- ARGV[at + 2] '1' to read the record back, '0' not to
-- ARGV[at + 3..] field, value, …

local function moveQuery(meta, at)
  local state = redis.call('HGET', meta, 'state')
  if not state then return {} end
  if string.find(ARGV[at], ',' .. state .. ',', 1, true) then
    redis.call('HSET', meta, unpack(ARGV, at + 3))
    if ARGV[at + 1] ~= '0' then redis.call('EXPIRE', meta, ARGV[at + 1]) end
  end
  if ARGV[at + 2] == '0' then return {} end
  return redis.call('HGETALL', meta)
end
