-- Gives back all one kept result holds (after taking back what expired); idempotent.
--
-- KEYS[1..5] as includes/reclaimKept
-- ARGV[1] now (ms)
-- ARGV[2] query id
-- Returns the bytes it held.

--- @include "includes/reclaimKept"
return giveBack(ARGV[2])
