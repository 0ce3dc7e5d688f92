-- forget(meta): forgets a finished query's record unless its result is kept. True when the record
-- is gone (now, or lapsed before); false when it stays: its query is still open, or its result is
-- kept to be fetched.
--
-- ARGV[1] the final states, as ',a,b,'

local function forget(meta)
  local fields = redis.call('HMGET', meta, 'state', 'kept')
  if not fields[1] then return true end
  if fields[2] == 'true' or not string.find(ARGV[1], ',' .. fields[1] .. ',', 1, true) then return false end
  redis.call('UNLINK', meta)
  return true
end
