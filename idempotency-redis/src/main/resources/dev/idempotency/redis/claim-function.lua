-- Claims an idempotency record, or returns the one that prevents it. Shared by the single-key and
-- the batch scripts; each call touches one key only.
-- Returns {1, attempt} when claimed, or
--         {0, leaseExpired, state, attempt, fingerprint, payload, created, completed, leaseUntil, retainUntil}
local function claim(key, owner, fingerprint, lease, retention, takeover, debugKey, now)
  local r = redis.call('HMGET', key, 's', 'a', 'f', 'p', 'c', 'd', 'l', 'r')
  local state, retainUntil = r[1], tonumber(r[8])

  if not state or not retainUntil or retainUntil <= now then
    redis.call('DEL', key)
    redis.call('HSET', key, 's', 'I', 'o', owner, 'a', 1, 'f', fingerprint,
      'c', now, 'l', now + lease, 'r', now + retention)
    if debugKey ~= '' then
      redis.call('HSET', key, 'k', debugKey)
    end
    redis.call('PEXPIREAT', key, now + retention)
    return {1, 1}
  end

  local attempt = tonumber(r[2])
  local leaseExpired = state == 'I' and tonumber(r[7]) <= now
  if leaseExpired and takeover == '1' and r[3] == fingerprint then
    redis.call('HSET', key, 'o', owner, 'a', attempt + 1, 'l', now + lease)
    return {1, attempt + 1}
  end

  return {0, leaseExpired and 1 or 0, state, attempt, r[3], r[4], r[5], r[6], r[7], r[8]}
end

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
