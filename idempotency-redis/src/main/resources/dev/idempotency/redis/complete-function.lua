-- Writes the outcome of a claim, fenced by its owner token; the expiry (the window) is kept.
-- Returns 1 when written, 0 when the record is not ours (taken over, expired, released) any more.
local function complete(key, owner, state, payload, now)
  local r = redis.call('HMGET', key, 's', 'o')
  if r[1] ~= 'I' or r[2] ~= owner then
    return 0
  end
  redis.call('HSET', key, 's', state, 'p', payload, 'd', now)
  return 1
end

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
