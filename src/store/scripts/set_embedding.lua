if not load_record(KEYS[1], KEYS[4]) then return 0 end
local fields = {'embedding', ARGV[6]}
with_next_rev(fields)
write_record(fields)
sync(ARGV[7], {})
return 1
