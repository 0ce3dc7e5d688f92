-- Forgets a batch of kept results past the newest the index keeps, in one step: drops the entries
-- of each that went, moves each that ended late. Outside Redis Cluster only. Called with the
-- number of keys first.
--
-- KEYS[1] everyone's kept index
-- KEYS[2] the user's kept index
-- KEYS[3..] the record and the stream of each result, in turn
-- ARGV[1] the final states, as ',a,b,'
-- ARGV[2] the kept index's bound (as forgetKeptResult-2)
-- ARGV[3..] the results' query ids, in KEYS' order
-- Returns {the query ids of those gone, how many stay open}.

--- @include "includes/forgetKept"
local gone, open = {}, 0
for i = 3, #ARGV do
  local left = forgetKept(KEYS[2 * i - 3], KEYS[2 * i - 2])
  if left < 0 then
    redis.call('ZREM', KEYS[1], ARGV[i])
    redis.call('ZREM', KEYS[2], ARGV[i])
    gone[#gone + 1] = ARGV[i]
  elseif left > 0 then
    redis.call('ZADD', KEYS[2], left, ARGV[i])
  else
    open = open + 1
  end
end
return {gone, open}
