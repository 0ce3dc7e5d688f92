-- Writes a new query's record with its TTL, and adds the query to everyone's index and to its
-- owner's, in one script: where Redis is one node (createRecord-1 and indexQuery-1 otherwise).
--
-- KEYS[1] the record (a hash)
-- KEYS[2] everyone's index of queries
-- KEYS[3] the owner's index of queries
-- ARGV[1] the record's TTL (s)
-- ARGV[2] creation (ms): the score in both indexes
-- ARGV[3] query id
-- ARGV[4] the owner index's TTL (ms)
-- ARGV[5..] the record's fields: field, value, …
-- Returns how many entries the owner's index holds.

redis.call('HSET', KEYS[1], unpack(ARGV, 5))
redis.call('EXPIRE', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[4])
return redis.call('ZCARD', KEYS[3])
