-- Writes a new query's record with its TTL.
--
-- KEYS[1] the record (a hash)
-- ARGV[1] TTL (s)
-- ARGV[2..] field, value, …

redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('EXPIRE', KEYS[1], ARGV[1])
