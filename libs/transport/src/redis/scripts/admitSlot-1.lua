-- Counts a query against its owner's slots (SLUICE_MAX_ACTIVE_PER_USER), in one round trip.
-- Drops the slots past their deadline first. A query that holds its slot already (the script sent
-- again after a lost reply) is counted once. The set lives as long as its longest lease: a short
-- one never cuts a long one (a kept query's, held through its queue wait).
--
-- KEYS[1] the owner's slots: a sorted set of query ids, scored by each slot's deadline (ms)
-- ARGV[1] now (ms)
-- ARGV[2] the cap
-- ARGV[3] the new slot's deadline (ms)
-- ARGV[4] query id
-- ARGV[5] lease (ms)
-- Returns the count before this query's slot, or -1 (and no slot) when the cap is reached.

redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1])
local before = redis.call('ZCARD', KEYS[1])
if redis.call('ZSCORE', KEYS[1], ARGV[4]) then before = before - 1
elseif before >= tonumber(ARGV[2]) then return -1 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[4])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[5]) then redis.call('PEXPIRE', KEYS[1], ARGV[5]) end
return before
