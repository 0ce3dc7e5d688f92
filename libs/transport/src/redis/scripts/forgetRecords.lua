-- Forgets a batch of an index's finished queries' records in one step, and drops the entry of each
-- one gone. Outside Redis Cluster only, where a script may touch the keys of many queries. Called
-- with the number of keys first.
--
-- KEYS[1] the index
-- KEYS[2..] the records
-- ARGV[1] the final states, as ',a,b,'
-- ARGV[2..] the records' query ids, in KEYS' order
-- Returns how many records went.

--- @include "includes/forgetRecord"
local gone = 0
for i = 2, #KEYS do
  if forget(KEYS[i]) then
    redis.call('ZREM', KEYS[1], ARGV[i])
    gone = gone + 1
  end
end
return gone
