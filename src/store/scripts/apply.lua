if not load_record(KEYS[1], KEYS[4]) then return nil end
local h = record_fields(KEYS[1], KEYS[4], 'id', 'rev', 'related_user_ids')
local done = applied_to(h[1])
if type(done) == 'table' then return done end
if done then return {0, h[1]} end
if (h[2] or '') ~= ARGV[6] then
  return redis.error_reply('CONFLICT ' .. h[1])
end
local fields = {}
for i = 7, #ARGV do fields[#fields + 1] = ARGV[i] end
with_next_rev(fields)
write_record(fields)
record_effect(h[1])
sync(h[1], decode_list(h[3]))
return {1, h[1]}
