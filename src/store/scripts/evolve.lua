if not load_record(KEYS[1], KEYS[4]) then return nil end
local h = record_fields(KEYS[1], KEYS[4], 'id', 'name', 'opinion', 'strength', 'evidence_user_ids',
  'evolution_history', 'evidence_users_dropped', 'history_entries_dropped', 'stance', 'active',
  'version', 'reinforcement_count')
local log = decode_list(h[6])
local done = applied_to(h[1])
if type(done) == 'table' then return done end
if done then
  return {0, h[1], h[2], h[3], h[4] or '0', tostring(#log + (tonumber(h[8]) or 0))}
end
local version = current_version(h[11], log, h[8])
-- A new version starts its own count of reinforcements; the old one keeps its count.
local fields = {'opinion', ARGV[6], 'embedding', ARGV[7], 'strength', ARGV[8],
  'last_reinforced', ARGV[9], 'version', tostring(version + 1), 'reinforcement_count', '0',
  'curated', '1'}
local evolutions = add_history(fields, log, version_entry('evolution', version,
  {opinion = h[3], stance = h[9], strength = h[4], active = h[10], count = h[12]},
  {new_opinion = ARGV[6], timestamp = ARGV[9], reason = ARGV[10]}), tonumber(ARGV[15]), h[8])
if ARGV[11] ~= '' then
  fields[#fields + 1] = 'stance'; fields[#fields + 1] = ARGV[11]
  fields[#fields + 1] = 'stance_at'; fields[#fields + 1] = ARGV[12]
end
local evidence, dropped = evidence_with(h[5], ARGV[13], tonumber(ARGV[14]))
if evidence then
  fields[#fields + 1] = 'evidence_user_ids'; fields[#fields + 1] = evidence
end
if dropped > 0 then
  fields[#fields + 1] = 'evidence_users_dropped'
  fields[#fields + 1] = tostring((tonumber(h[7]) or 0) + dropped)
end
with_next_rev(fields)
fix_past(fields, ARGV[9])
write_record(fields)
record_effect(h[1])
sync(h[1], {})
return {1, h[1], h[2], ARGV[6], ARGV[8], tostring(evolutions)}
