-- Deletes an in-progress record so the key can be claimed again, fenced by its owner token.
-- KEYS[1] the record's key; ARGV[1] owner token
-- Returns 1 when deleted, 0 when the record is not ours any more.
local r = redis.call('HMGET', KEYS[1], 's', 'o')
if r[1] ~= 'I' or r[2] ~= ARGV[1] then
  return {0}
end
redis.call('DEL', KEYS[1])
return {1}
