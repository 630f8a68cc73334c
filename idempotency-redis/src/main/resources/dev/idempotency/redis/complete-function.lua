-- Writes the outcome of a claim, fenced by its owner token; the expiry (the window) is kept.
-- Returns 1 when written, 0 when the record is not ours (taken over, expired, released) any more.
-- The hot path of every first send, so it stands alone: it checks the record's head ('I' and the
-- owner field) and copies the fields from attempt to window verbatim instead of parsing them (the
-- layout is described in record-functions.lua). now is the server's time, read once per script.
local function complete(key, owner, state, payload, now)
  local old = redis.call('GET', key)
  local head = 'I' .. #owner .. ':' .. owner
  if not old or string.sub(old, 1, #head) ~= head then
    return 0
  end
  local middle = string.sub(old, #head + 1, -7)
  local elapsed = tonumber(string.match(middle, ':(%d+)$')) - redis.call('PTTL', key)
  local created = string.format('%d', now - elapsed)
  local completed = string.format('%d', elapsed)
  redis.call('SET', key, state .. '0:' .. middle .. #created .. ':' .. created .. #completed .. ':'
    .. completed .. #payload .. ':' .. payload, 'KEEPTTL')
  return 1
end

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
