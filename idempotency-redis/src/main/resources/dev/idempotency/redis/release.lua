-- Deletes an in-progress record so the key can be claimed again, fenced by its owner token.
-- KEYS[1] the record's key; ARGV[1] owner token
-- Returns 1 when deleted, 0 when the record is not ours any more.
if not ownedInProgress(redis.call('GET', KEYS[1]), ARGV[1]) then
  return {0}
end
redis.call('DEL', KEYS[1])
return {1}
