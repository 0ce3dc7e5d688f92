-- Pushes a slot's deadline forward, only while the slot is still there: a beat that comes after
-- the release adds nothing.
--
-- KEYS[1] the owner's slots (as admitSlot-1)
-- ARGV[1] the new deadline (ms)
-- ARGV[2] query id
-- ARGV[3] lease (ms)
-- Returns 1, or 0 when the slot was gone.

if not redis.call('ZSCORE', KEYS[1], ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return 1
