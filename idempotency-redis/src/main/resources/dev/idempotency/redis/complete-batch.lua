-- Completes every key of KEYS (standalone Redis only); ARGV holds three arguments per key.
-- A key whose value cannot be read answers 0, not written (see perKey), as one not ours does.
local replies = {}
for i = 1, #KEYS do
  local a = (i - 1) * 3
  replies[i] = perKey(0, complete, KEYS[i], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], now)
end
return replies
