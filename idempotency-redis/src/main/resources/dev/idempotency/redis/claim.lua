-- KEYS[1] the record's key; ARGV: owner token, fingerprint ('' for none), lease ms, retention ms,
-- '1' to take over an expired lease ('0' in strict mode), raw key for debugging ('' when not kept)
return claim(KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5], ARGV[6], now)
