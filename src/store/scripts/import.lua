if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local fields = {}
for i = 6, #ARGV do fields[#fields + 1] = ARGV[i] end
write_record(fields)
sync(ARGV[7], {})
return 1
