-- Writes the outcome of a claim, fenced by its owner token; the expiry (the window) is kept.
-- Returns 1 when written, or when this owner already wrote this very outcome (a retry after a lost
-- reply); 0 when the record is not ours any more (taken over, expired, released).
-- The hot path of every first send, so it stands alone: it checks the record's head ('I' and the
-- owner field) and copies the fields from attempt to window verbatim instead of parsing them (the
-- layout is described in record-functions.lua). now is the server's time, read once per script.
-- The owner token stays in the settled record, so that a repeated completion can be recognised.

-- Whether a settled value holds exactly this outcome: its payload, the last of its nine fields.
local function holdsOutcome(value, payload)
  local i, f = 2, 0
  while f < 8 do
    local colon = string.find(value, ':', i, true)
    i = colon + tonumber(string.sub(value, i, colon - 1)) + 1
    f = f + 1
  end
  local colon = string.find(value, ':', i, true)
  return tonumber(string.sub(value, i, colon - 1)) == #payload
    and string.sub(value, colon + 1) == payload
end

local function complete(key, owner, state, payload, now)
  local old = redis.call('GET', key)
  if not old then
    return 0
  end
  local owned = #owner .. ':' .. owner
  local head = 'I' .. owned
  if string.sub(old, 1, #head) ~= head then
    if string.sub(old, 1, #head) == state .. owned and holdsOutcome(old, payload) then
      return 1
    end
    return 0
  end
  local middle = string.sub(old, #head + 1, -7)
  local elapsed = tonumber(string.match(middle, ':(%d+)$')) - redis.call('PTTL', key)
  local created = string.format('%d', now - elapsed)
  local completed = string.format('%d', elapsed)
  redis.call('SET', key, state .. owned .. middle .. #created .. ':' .. created .. #completed
    .. ':' .. completed .. #payload .. ':' .. payload, 'KEEPTTL')
  return 1
end

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
