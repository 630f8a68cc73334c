-- Takes back a claim nothing was sent under, fenced by its owner token, as if it had lapsed: a
-- record the claim created (attempt 1) is deleted; one it took over (a later attempt) keeps its
-- attempt and window, its lease ending now (if it had not ended before), so that the next claim
-- takes it over at once and the earlier owner's attempt, which may have sent, is not forgotten.
-- A kept record gets the fresh owner token ARGV[2], which no caller holds, so that no late write of
-- the claim taken back (a renewal, a completion, a release) passes the fence again.
-- KEYS[1] the record's key; ARGV[1] owner token; ARGV[2] the owner token a kept record gets
-- Returns 1 when taken back, 0 when the record is not ours any more, or cannot be read (see perKey).
local function takeBack(key, owner, ended)
  local old = redis.call('GET', key)
  if not ownedInProgress(old, owner) then
    return 0
  end
  local f = fields(old)
  if tonumber(f[2]) == 1 then
    redis.call('DEL', key)
    return 1
  end
  local pttl = redis.call('PTTL', key)
  if pttl <= 0 then
    return 0
  end
  local elapsed = tonumber(f[6]) - pttl
  local lease = math.min(elapsed, tonumber(f[5]))
  rewrite(key, 'I' .. field(ended) .. field(f[2]) .. field(f[3]) .. field(f[4]) .. num(lease)
    .. field(f[6]) .. '0:0:0:')
  return 1
end

return {perKey(0, takeBack, KEYS[1], ARGV[1], ARGV[2])}
