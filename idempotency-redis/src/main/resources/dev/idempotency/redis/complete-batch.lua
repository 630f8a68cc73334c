-- Completes every key of KEYS (standalone Redis only); ARGV holds three arguments per key.
local replies = {}
for i = 1, #KEYS do
  local a = (i - 1) * 3
  replies[i] = complete(KEYS[i], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], now)
end
return replies
