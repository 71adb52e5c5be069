if load_record(KEYS[1], KEYS[4]) then return 0 end
local fields = {}
for i = 6, #ARGV do fields[#fields + 1] = ARGV[i] end
write_record(fields)
sync(ARGV[7], {})
return 1
