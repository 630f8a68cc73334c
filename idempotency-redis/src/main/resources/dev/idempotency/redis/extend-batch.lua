-- Renews every key of KEYS (standalone Redis only); ARGV holds two arguments per key, in the order
-- of extend.lua. Returns one reply per key; 0 for a value this store cannot read (see perKey).
local replies = {}
for i = 1, #KEYS do
  local a = (i - 1) * 2
  replies[i] = perKey(0, extend, KEYS[i], ARGV[a + 1], tonumber(ARGV[a + 2]))
end
return replies
