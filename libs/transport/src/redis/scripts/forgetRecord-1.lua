-- Forgets one finished query's record unless its result is kept (includes/forgetRecord). In Redis
-- Cluster, where a script touches one query's keys.
--
-- KEYS[1] the record
-- ARGV[1] the final states, as ',a,b,'
-- Returns 1 when the record is gone, 0 when it stays.

--- @include "includes/forgetRecord"
if forget(KEYS[1]) then return 1 end
return 0
