-- Deletes a settled (completed or failed) record so that its key is claimed afresh; never one in
-- progress, whose owner may be sending. KEYS[1] the record's key. Returns 1 when deleted, else 0.
local value = redis.call('GET', KEYS[1])
if not value or string.sub(value, 1, 1) == 'I' then
  return {0}
end
redis.call('DEL', KEYS[1])
return {1}
