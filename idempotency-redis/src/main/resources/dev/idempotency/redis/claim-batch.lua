-- Claims every key of KEYS (standalone Redis only: the keys may live in different slots).
-- ARGV holds six arguments per key, in the order of claim.lua. Returns one reply per key.
local replies = {}
for i = 1, #KEYS do
  local a = (i - 1) * 6
  replies[i] = claim(KEYS[i], ARGV[a + 1], tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]),
    ARGV[a + 4], ARGV[a + 5], ARGV[a + 6])
end
return replies
