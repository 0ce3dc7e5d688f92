-- Forgets one kept result past the newest the index keeps, or moves it up if it ended late
-- (includes/forgetKept). In Redis Cluster.
--
-- KEYS[1] its record
-- KEYS[2] its stream
-- ARGV[1] the final states, as ',a,b,'
-- ARGV[2] the kept index's bound: the score of the oldest of the newest kept
-- Returns -1 when it is gone, 0 when its query is still open, else when it ended (ms).

--- @include "includes/forgetKept"
return forgetKept(KEYS[1], KEYS[2])
