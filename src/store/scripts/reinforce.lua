if not load_record(KEYS[1], KEYS[4]) then return nil end
local h = record_fields(KEYS[1], KEYS[4], 'id', 'name', 'strength', 'reinforcement_count',
  'evidence_user_ids', 'reinforcements', 'evidence_users_dropped')
local done = applied_to(h[1])
if type(done) == 'table' then return done end
if done then
  return {0, h[1], h[2], h[3] or '0', h[4] or '0'}
end
local strength = tonumber(h[3]) or 0
local rate = tonumber(ARGV[6])
strength = strength + rate * (1 - strength)
if strength > 1 then strength = 1 end
if strength < 0 then strength = 0 end
local count = (tonumber(h[4]) or 0) + 1
local formatted = string.format('%.17g', strength)
-- Through the service: an administrator vouched for it.
local fields = {'strength', formatted, 'last_reinforced', ARGV[7], 'reinforcement_count', tostring(count),
  'curated', '1'}
local evidence, dropped = evidence_with(h[5], ARGV[8], tonumber(ARGV[11]))
if evidence then
  fields[#fields + 1] = 'evidence_user_ids'
  fields[#fields + 1] = evidence
end
if dropped > 0 then
  fields[#fields + 1] = 'evidence_users_dropped'
  fields[#fields + 1] = tostring((tonumber(h[7]) or 0) + dropped)
end
local keep = tonumber(ARGV[10])
if keep > 0 then
  local log = decode_list(h[6])
  log[#log + 1] = cjson.decode(ARGV[9])
  while #log > keep do table.remove(log, 1) end
  fields[#fields + 1] = 'reinforcements'
  fields[#fields + 1] = encode_list(log)
end
with_next_rev(fields)
fix_past(fields, ARGV[7])
write_record(fields)
record_effect(h[1])
sync(h[1], {})
return {1, h[1], h[2], formatted, tostring(count)}
