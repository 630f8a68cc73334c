-- Reads a record without changing it, for operators. KEYS[1] the record's key.
-- Returns {} when there is none, {0, record} for a settled one, {1, record, now, pttl} for one in
-- progress (its times are derived from the key's remaining TTL and the server's time).
local value = redis.call('GET', KEYS[1])
if not value then
  return {}
end
if string.sub(value, 1, 1) ~= 'I' then
  return {0, value}
end
local now, remaining = nowAndRemaining(KEYS[1], nil)
return {1, value, now, remaining}
