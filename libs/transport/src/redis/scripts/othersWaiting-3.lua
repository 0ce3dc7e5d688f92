-- Whether a job of another user is among the next ones a worker would take in one lane, or the
-- next ones put off (a user past its share, who waits for a slot as much). A job's name is its
-- user's (BullmqJobQueue.enqueue): the check never decodes a job's data, whose statement may be
-- megabytes, and Redis runs nothing else meanwhile. A job's hash may be gone (taken and removed
-- meanwhile): it waits no more.
--
-- KEYS[1] the lane's wait list
-- KEYS[2] its prioritized set
-- KEYS[3] its delayed set
-- ARGV[1] the prefix of a job's key (the key without the job's id)
-- ARGV[2] user name
-- ARGV[3] how many jobs to read at the head of each
-- Returns 1 when another user's job is there, else 0.

local n = tonumber(ARGV[3])
local ids = redis.call('LRANGE', KEYS[1], -n, -1)
for k = 2, 3 do
  for _, id in ipairs(redis.call('ZRANGE', KEYS[k], 0, n - 1)) do ids[#ids + 1] = id end
end
for _, id in ipairs(ids) do
  local user = redis.call('HGET', ARGV[1] .. id, 'name')
  if user and user ~= ARGV[2] then return 1 end
end
return 0
