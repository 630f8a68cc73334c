-- Claims every key of KEYS (standalone Redis only: the keys may live in different slots).
-- ARGV[1] is '1' when the server takes SET NX GET (Redis 7.0 and later); then six arguments per
-- key, in the order of claim.lua. Returns one reply per key: 1 for a new key, now claimed, or
-- claim's reply. With SET NX GET a new or settled key costs one command, as on the single-key path
-- (a GET and then a SET cost about half as much again); a record in progress goes to claim.
-- A key whose value cannot be read answers -1 (see perKey); the other keys are claimed.
local setGet = ARGV[1] == '1'

local function claimKey(key, a)
  local old = setGet and redis.call('SET', key, ARGV[a + 1], 'NX', 'GET', 'PX', ARGV[a + 2])
  if setGet and not old then
    return 1
  elseif setGet and string.sub(old, 1, 1) ~= 'I' then
    return {0, 0, old}
  end
  return claim(key, ARGV[a + 1], tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), ARGV[a + 4],
    ARGV[a + 5], ARGV[a + 6])
end

local replies = {}
for i = 1, #KEYS do
  replies[i] = perKey(-1, claimKey, KEYS[i], 1 + (i - 1) * 6)
end
return replies
