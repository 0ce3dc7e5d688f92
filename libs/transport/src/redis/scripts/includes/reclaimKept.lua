-- giveBack(id), and a first step that takes back what the kept results past their expiry held: a
-- stream that expired is gone from Redis, so are its bytes, from the total and from its owner's.
-- A hundred at a time, so that no call runs long; the next call takes the rest.
--
-- KEYS[1] the bytes all kept results hold
-- KEYS[2] what each holds (query id → bytes)
-- KEYS[3] when each expires (query id by time)
-- KEYS[4] what each user's hold (user name → bytes)
-- KEYS[5] whose each is (query id → user name)
-- ARGV[1] now (ms)

local function giveBack(id)
  local held = redis.call('HGET', KEYS[2], id)
  if held then
    redis.call('DECRBY', KEYS[1], held)
    redis.call('HDEL', KEYS[2], id)
    local owner = redis.call('HGET', KEYS[5], id)
    if owner and redis.call('HINCRBY', KEYS[4], owner, -tonumber(held)) <= 0 then
      redis.call('HDEL', KEYS[4], owner)
    end
  end
  redis.call('HDEL', KEYS[5], id)
  redis.call('ZREM', KEYS[3], id)
  return tonumber(held or '0')
end
local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', ARGV[1], 'LIMIT', 0, 100)
for _, id in ipairs(gone) do giveBack(id) end
