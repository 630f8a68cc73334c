-- Deletes a settled (completed or failed) record so that its key is claimed afresh; never one in
-- progress, whose owner may be sending. A key of another Redis type under the store's prefix is
-- deleted as a value in another format is: it cannot be read, so an operator removes it this way.
-- KEYS[1] the record's key. Returns 1 when deleted, else 0.
local value = redis.pcall('GET', KEYS[1])
if type(value) == 'table' and value.err then
  if not string.find(value.err, '^WRONGTYPE') then
    return redis.error_reply(value.err)
  end
elseif not value or string.sub(value, 1, 1) == 'I' then
  return {0}
end
redis.call('DEL', KEYS[1])
return {1}
