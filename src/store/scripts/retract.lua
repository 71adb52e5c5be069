if not load_record(KEYS[1], KEYS[4]) then return nil end
local h = record_fields(KEYS[1], KEYS[4], 'id', 'name', 'opinion', 'evolution_history',
  'history_entries_dropped', 'stance', 'strength', 'active', 'version', 'reinforcement_count')
local done = applied_to(h[1])
if type(done) == 'table' then return done end
if done then return {0, h[1], h[2]} end
local fields = {'active', '0'}
-- Always a version, so the preference as it was can be restored.
local log = decode_list(h[4])
local version = current_version(h[9], log, h[5])
fields[#fields + 1] = 'version'; fields[#fields + 1] = tostring(version + 1)
add_history(fields, log, version_entry('retraction', version,
  {opinion = h[3], stance = h[6], strength = h[7], active = h[8], count = h[10]},
  {timestamp = ARGV[7], reason = ARGV[6]}), tonumber(ARGV[8]), h[5])
with_next_rev(fields)
fix_past(fields, ARGV[7])
write_record(fields)
record_effect(h[1])
sync(h[1], {})
return {1, h[1], h[2]}
