-- Records a running query's progress: only while it runs, so that a late report never changes an
-- ended query, nor makes a record out of nothing.
--
-- KEYS[1] the record
-- ARGV[1] rows produced
-- ARGV[2] bytes produced
-- ARGV[3] when it began streaming (ms), or ''

local state = redis.call('HGET', KEYS[1], 'state')
if state == 'running' or state == 'streaming' then
  redis.call('HSET', KEYS[1], 'rowsProduced', ARGV[1], 'bytesProduced', ARGV[2])
  if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'streamingAt', ARGV[3]) end
end
