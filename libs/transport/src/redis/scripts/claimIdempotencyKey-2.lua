-- Claims an Idempotency-Key for a query. The owner's set lives as long as its newest claim.
--
-- KEYS[1] the key's claim
-- KEYS[2] its owner's live keys: a sorted set of key digests, scored by expiry (ms)
-- ARGV[1] the claim (the query it stands for, and the request's fingerprint)
-- ARGV[2] TTL (ms)
-- ARGV[3] now (ms)
-- ARGV[4] most live keys an owner may hold
-- ARGV[5] the key's digest
-- Returns {'held', claim} for a key claimed already, {'full', the oldest's expiry} when the owner
-- holds the most, else {'claimed'}.

local held = redis.call('GET', KEYS[1])
if held then return {'held', held} end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[3])
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then
  return {'full', redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')[2]}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], tonumber(ARGV[3]) + tonumber(ARGV[2]), ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return {'claimed'}
