-- Claims an idempotency record, or returns the one that prevents it, in one atomic step.
-- KEYS[1]  the record's Redis key (prefix + key digest): a hash
-- ARGV[1]  owner token    ARGV[2] fingerprint ('' for none)
-- ARGV[3]  lease (ms)     ARGV[4] retention (ms)
-- ARGV[5]  '1' to take over an expired lease, '0' for strict mode
-- ARGV[6]  raw key for debugging, '' when not stored
-- Returns {1, attempt} when claimed, or
--         {0, leaseExpired, state, attempt, fingerprint, payload, created, completed, leaseUntil, retainUntil}
local key = KEYS[1]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local lease = tonumber(ARGV[3])
local retention = tonumber(ARGV[4])

local r = redis.call('HMGET', key, 's', 'a', 'f', 'p', 'c', 'd', 'l', 'r')
local state, retainUntil = r[1], tonumber(r[8])

if not state or not retainUntil or retainUntil <= now then
  redis.call('DEL', key)
  redis.call('HSET', key, 's', 'I', 'o', ARGV[1], 'a', 1, 'f', ARGV[2],
    'c', now, 'l', now + lease, 'r', now + retention)
  if ARGV[6] ~= '' then
    redis.call('HSET', key, 'k', ARGV[6])
  end
  redis.call('PEXPIREAT', key, now + retention)
  return {1, 1}
end

local attempt = tonumber(r[2])
local leaseExpired = state == 'I' and tonumber(r[7]) <= now
if leaseExpired and ARGV[5] == '1' and r[3] == ARGV[2] then
  redis.call('HSET', key, 'o', ARGV[1], 'a', attempt + 1, 'l', now + lease)
  return {1, attempt + 1}
end

return {0, leaseExpired and 1 or 0, state, attempt, r[3], r[4], r[5], r[6], r[7], r[8]}
