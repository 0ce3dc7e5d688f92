-- The bytes all kept results hold together, after taking back what expired (includes/reclaimKept).
--
-- KEYS[1..5] as includes/reclaimKept
-- ARGV[1] now (ms)
-- Returns the total.

--- @include "includes/reclaimKept"
return tonumber(redis.call('GET', KEYS[1]) or '0')
