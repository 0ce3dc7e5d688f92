-- forgetKept(meta, out): looks at a kept result past the newest the index keeps. -1 when it is gone,
-- with its record and stream (it ended before the bound, or its record lapsed); 0 when its query
-- is still open; else the time it ended, after the bound: it is among the newest by its end.
--
-- ARGV[1] the final states, as ',a,b,'
-- ARGV[2] the kept index's bound: the score of the oldest of the newest kept

local function forgetKept(meta, out)
  local fields = redis.call('HMGET', meta, 'state', 'finishedAt')
  if fields[1] and not string.find(ARGV[1], ',' .. fields[1] .. ',', 1, true) then return 0 end
  local ended = tonumber(fields[2] or '0')
  if fields[1] and ended >= tonumber(ARGV[2]) then return ended end
  redis.call('UNLINK', meta, out)
  return -1
end
