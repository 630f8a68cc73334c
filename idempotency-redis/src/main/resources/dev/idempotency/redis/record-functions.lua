-- A record is one Redis string, expiring at the end of its window:
--   state ('I', 'C' or 'F'), then nine fields, each written as <byte length>:<bytes>:
--   1 owner token                        2 attempt             3 fingerprint
--   4 raw key for debugging ('' if not kept)                   5 lease end, ms after created
--   6 window, ms after created          7 created, server ms ('' while 'I')
--   8 completed, ms after created ('' while 'I')               9 payload ('' while 'I')
-- An in-progress record holds no absolute time (it is written by a plain SET NX GET PX from the
-- client), so times are derived from the key's remaining TTL: elapsed = window - PTTL. Its last
-- three fields are empty, so it ends in '0:0:0:'.
-- A length that is not plain digits (a sign, a fraction, an exponent, nothing), or a field that
-- runs past the value's end, is an error, which perKey answers as that key's unreadable record:
-- tonumber alone let a negative length step back, and the loop never ended (the script held the
-- whole server). With plain digits every field moves i forward, so the loop ends.
local function fields(value)
  local f, i = {}, 2
  while i <= #value do
    local colon = string.find(value, ':', i, true)
    if colon == nil then
      error('a record field has no length')
    end
    local length = string.sub(value, i, colon - 1)
    if not string.match(length, '^%d+$') then
      error('a record field length is not a number')
    end
    local n = tonumber(length)
    if colon + n > #value then
      error('a record field runs past the end of the value')
    end
    f[#f + 1] = string.sub(value, colon + 1, colon + n)
    i = colon + n + 1
  end
  return f
end

local function field(s)
  return #s .. ':' .. s
end

local function num(n)
  return field(string.format('%d', n))
end

local function serverNow()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The server's now and the key's remaining time counted from that same now, from which an
-- in-progress record's times are derived. Inside a script PTTL counts from the script's start (its
-- clock is frozen) while TIME reads the real clock, so TIME + PTTL came out a millisecond later on
-- some reads than on others. PEXPIRETIME (Redis 7.0 and newer, Valkey) gives the expiry itself;
-- an older server answers with pttl, or PTTL when pttl is nil, and so does a key without an
-- expiry (PEXPIRETIME -1: only a key persisted by hand; PTTL's -1 reads as just ended).
local function nowAndRemaining(key, pttl)
  local now = serverNow()
  local ok, expiresAt = pcall(redis.call, 'PEXPIRETIME', key)
  if ok and expiresAt >= 0 then
    return now, expiresAt - now
  end
  return now, pttl or redis.call('PTTL', key)
end

-- Rewrites a record keeping its expiry (the window).
local function rewrite(key, value)
  redis.call('SET', key, value, 'KEEPTTL')
end

-- Writes an in-progress record f (as parsed) under a new owner and attempt, its lease ending lease
-- ms from now (elapsed ms after created). A lease never outlives its record: if the key would
-- expire before the lease ends, the window field and the key's expiry move to the lease's end,
-- so that a live owner's record never ends under it, even past the window.
local function leased(key, f, owner, attempt, elapsed, lease)
  local leaseEnd = elapsed + lease
  local window = tonumber(f[6])
  if leaseEnd > window then
    redis.call('SET', key, 'I' .. field(owner) .. num(attempt) .. field(f[3]) .. field(f[4])
      .. num(leaseEnd) .. num(leaseEnd) .. '0:0:0:', 'PX', lease)
  else
    rewrite(key, 'I' .. field(owner) .. num(attempt) .. field(f[3]) .. field(f[4])
      .. num(leaseEnd) .. field(f[6]) .. '0:0:0:')
  end
end

-- Claims a key, or returns the record that prevents it. value is the new in-progress record as
-- the client encoded it. Returns {1, attempt} when claimed, {0, 0, record} for a settled record,
-- or {0, leaseExpired, record, now, pttl} for one in progress.
local function claim(key, value, window, lease, takeover, owner, fingerprint)
  local old = redis.call('GET', key)
  if not old then
    redis.call('SET', key, value, 'PX', window)
    return {1, 1}
  end
  if string.sub(old, 1, 1) ~= 'I' then
    return {0, 0, old}
  end
  local f = fields(old)
  local pttl = redis.call('PTTL', key)
  local elapsed = tonumber(f[6]) - pttl
  local leaseExpired = elapsed >= tonumber(f[5])
  if leaseExpired and takeover == '1' and f[3] == fingerprint then
    local attempt = tonumber(f[2]) + 1
    leased(key, f, owner, attempt, elapsed, lease)
    return {1, attempt}
  end
  local now, remaining = nowAndRemaining(key, pttl)
  return {0, leaseExpired and 1 or 0, old, now, remaining}
end

-- Whether a value is in progress under this owner token: its head is 'I' and the owner field.
local function ownedInProgress(value, owner)
  local head = 'I' .. field(owner)
  return value ~= false and string.sub(value, 1, #head) == head
end

-- Renews the lease of an in-progress record, fenced by its owner token: the lease now ends lease
-- ms from the server's now, and the record lives at least that long (see leased). Returns 1 when
-- renewed, 0 when the record is not ours any more (taken over, completed, released, expired).
local function extend(key, owner, lease)
  local old = redis.call('GET', key)
  if not ownedInProgress(old, owner) then
    return 0
  end
  local f = fields(old)
  local pttl = redis.call('PTTL', key)
  if pttl <= 0 then
    return 0
  end
  local elapsed = tonumber(f[6]) - pttl
  leased(key, f, f[1], tonumber(f[2]), elapsed, lease)
  return 1
end
