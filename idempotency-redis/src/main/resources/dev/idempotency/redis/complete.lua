-- KEYS[1] the record's key; ARGV[1] owner token; ARGV[2] 'C' or 'F'; ARGV[3] payload.
-- A value this store cannot read answers 0, not written (see perKey), as one not ours does.
return {perKey(0, complete, KEYS[1], ARGV[1], ARGV[2], ARGV[3], now)}
