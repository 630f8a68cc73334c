-- Runs one key's part of a script, so that a value this store cannot read answers unreadable for
-- that key alone instead of failing the whole script, and with it every key of a batch: a key of
-- another Redis type (WRONGTYPE from GET or SET), or a record's head with a tail the parsing fails
-- on (a Lua error, such as arithmetic on a missing field). Any other error of a Redis command
-- (out of memory, a read-only replica, ...) still fails the script: the store is failing, not one
-- record. A Redis command error caught here is a string on Redis 7.0 and a table on later ones.
local function perKey(unreadable, fn, ...)
  local ok, reply = pcall(fn, ...)
  if ok then
    return reply
  end
  local message = type(reply) == 'table' and reply.err or tostring(reply)
  if string.find(message, '^WRONGTYPE') or not string.find(message, '^%u+ ') then
    return unreadable
  end
  error({err = message})
end
