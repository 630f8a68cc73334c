-- Writes the outcome of a claim, fenced by its owner token. The expiry (the window) is kept.
-- KEYS[1] the record's key; ARGV[1] owner token; ARGV[2] 'C' or 'F'; ARGV[3] payload
-- Returns 1 when written, 0 when the record is not ours (taken over, expired, released) any more.
local key = KEYS[1]
local r = redis.call('HMGET', key, 's', 'o')
if r[1] ~= 'I' or r[2] ~= ARGV[1] then
  return 0
end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('HSET', key, 's', ARGV[2], 'p', ARGV[3], 'd', now)
return 1
