-- KEYS[1] the record's key; ARGV[1] owner token; ARGV[2] 'C' or 'F'; ARGV[3] payload
return {complete(KEYS[1], ARGV[1], ARGV[2], ARGV[3], now)}
