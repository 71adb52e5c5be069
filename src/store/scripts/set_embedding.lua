if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local fields = {'embedding', ARGV[6]}
with_next_rev(fields)
write_record(fields)
sync(ARGV[7], {})
return 1
