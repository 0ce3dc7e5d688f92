-- Moves a query's record to a new state, if its state is one it may move from.
--
-- KEYS[1] the record
-- ARGV[1..] as includes/moveQuery takes them, from 1
-- Returns the record as it is then (HGETALL), or {} (not asked, or no record).

--- @include "includes/moveQuery"
return moveQuery(KEYS[1], 1)
