-- Adds a query to its owner's index, which lives as long as the owner's newest query may stay
-- open.
--
-- KEYS[1] the owner's index of queries
-- ARGV[1] creation (ms): its score
-- ARGV[2] query id
-- ARGV[3] the index's TTL (ms)
-- Returns how many entries the index holds.

redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return redis.call('ZCARD', KEYS[1])
