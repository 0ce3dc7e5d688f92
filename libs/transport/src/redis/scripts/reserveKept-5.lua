-- Brings what one kept result holds up to a total, after taking back what expired. Given as the
-- result's own total rather than what to add, so that a reservation run twice (ioredis sends a
-- command again when its connection drops before the reply) counts once. A reservation of what
-- the result holds already only moves its expiry.
--
-- KEYS[1..5] as includes/reclaimKept
-- ARGV[1] now (ms)
-- ARGV[2] query id
-- ARGV[3] the result's total after this reservation
-- ARGV[4] the cap of all kept results together
-- ARGV[5] the reservation's expiry (ms)
-- ARGV[6] owner
-- ARGV[7] the cap of the owner's
-- Returns -1 (nothing reserved) when the total of all would pass its cap, -2 when the owner's would,
-- else the total of all after.

--- @include "includes/reclaimKept"
local total = tonumber(redis.call('GET', KEYS[1]) or '0')
local bytes = tonumber(ARGV[3]) - tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0')
if bytes > 0 then
  local owned = tonumber(redis.call('HGET', KEYS[4], ARGV[6]) or '0')
  if owned + bytes > tonumber(ARGV[7]) then return -2 end
  if total + bytes > tonumber(ARGV[4]) then return -1 end
  redis.call('INCRBY', KEYS[1], bytes)
  redis.call('HINCRBY', KEYS[2], ARGV[2], bytes)
  redis.call('HINCRBY', KEYS[4], ARGV[6], bytes)
  redis.call('HSET', KEYS[5], ARGV[2], ARGV[6])
  total = total + bytes
end
if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 1 then
  redis.call('ZADD', KEYS[3], ARGV[5], ARGV[2])
end
return total
