-- KEYS[1] the record's key; ARGV[1] owner token; ARGV[2] lease ms
return {extend(KEYS[1], ARGV[1], tonumber(ARGV[2]))}
