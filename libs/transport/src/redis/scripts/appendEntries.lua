-- Appends a query's entries to its stream, in one step with what goes with them. An id the stream
-- has passed fails the script at that XADD: the same append sent again (ioredis resends a command
-- whose connection dropped before its reply) stops at its first entry and changes nothing.
-- Called with the number of keys first (2, or 3 when the entries end the query).
--
-- KEYS[1] the stream
-- KEYS[2] the query's cancel key
-- KEYS[3] its record, only when the entries end the query and record its end
-- ARGV[1] the stream's TTL (s)
-- ARGV[2] the id to trim the stream to (MINID), or ''
-- ARGV[3] '1' to read back what flow control needs, '0' not to
-- ARGV[4] how many entries; then each entry's id, its number of fields and its fields; then, with
--         KEYS[3], the record's move as moveQuery takes it (includes/moveQuery)
-- Returns {the stream's length, 1 when the query is cancelled else 0}, or {} when not asked.

--- @include "includes/moveQuery"
local at = 5
for _ = 1, tonumber(ARGV[4]) do
  local n = tonumber(ARGV[at + 1])
  redis.call('XADD', KEYS[1], ARGV[at], unpack(ARGV, at + 2, at + 1 + n))
  at = at + 2 + n
end
if ARGV[2] ~= '' then redis.call('XTRIM', KEYS[1], 'MINID', ARGV[2]) end
redis.call('EXPIRE', KEYS[1], ARGV[1])
if KEYS[3] then moveQuery(KEYS[3], at) end
if ARGV[3] == '0' then return {} end
return {redis.call('XLEN', KEYS[1]), redis.call('EXISTS', KEYS[2])}
