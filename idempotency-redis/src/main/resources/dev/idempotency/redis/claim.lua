-- KEYS[1] the record's key; ARGV: the new in-progress record, window ms, lease ms, '1' to take
-- over an expired lease ('0' in strict mode), owner token, fingerprint ('' for none).
-- Returns claim's reply, or {-1} for a value this store cannot read (see perKey).
return perKey({-1}, claim, KEYS[1], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4],
  ARGV[5], ARGV[6])
