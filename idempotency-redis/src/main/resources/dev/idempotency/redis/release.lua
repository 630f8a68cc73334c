-- Deletes an in-progress record so the key can be claimed again, fenced by its owner token.
-- KEYS[1] the record's key; ARGV[1] owner token
-- Returns 1 when deleted, 0 when the record is not ours any more, or cannot be read (see perKey).
local function release(key, owner)
  if not ownedInProgress(redis.call('GET', key), owner) then
    return 0
  end
  redis.call('DEL', key)
  return 1
end

return {perKey(0, release, KEYS[1], ARGV[1])}
