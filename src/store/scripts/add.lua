local existing = applied_before()
if existing then return {0, existing} end
local fields = {}
for i = 7, #ARGV do fields[#fields + 1] = ARGV[i] end
write_record(fields)
record_effect(ARGV[8])
if ARGV[6] ~= '' then record_effect_as(ARGV[6], ARGV[8]) end
sync(ARGV[8], {})
return {1, ARGV[8]}
