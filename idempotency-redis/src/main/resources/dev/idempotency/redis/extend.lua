-- KEYS[1] the record's key; ARGV[1] owner token; ARGV[2] lease ms. Returns {0} for a value this
-- store cannot read (see perKey): not renewed.
return {perKey(0, extend, KEYS[1], ARGV[1], tonumber(ARGV[2]))}
