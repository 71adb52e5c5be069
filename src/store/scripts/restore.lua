if not load_record(KEYS[1], KEYS[4]) then return nil end
local h = record_fields(KEYS[1], KEYS[4], 'id', 'name', 'opinion', 'strength', 'stance', 'active',
  'evolution_history', 'history_entries_dropped', 'version', 'reinforcement_count')
local log = decode_list(h[7])
local dropped = tonumber(h[8]) or 0
local current = current_version(h[9], log, h[8])
local wanted = tonumber(ARGV[6])
if wanted == current then
  return {0, h[1], h[2], h[3] or '', tostring(current), h[6] or ''}
end
local target
local kept = {}
for i, entry in ipairs(log) do
  local version = tonumber(entry.version) or (dropped + i)
  kept[#kept + 1] = tostring(version)
  if version == wanted then target = entry end
end
if not target or not target.old_opinion or target.old_opinion == '' then
  return {-1, table.concat(kept, ',')}
end
local opinion = target.old_opinion
local fields = {'opinion', opinion, 'version', tostring(current + 1), 'stance_at', ARGV[7],
  'curated', '1'}
if target.old_stance ~= nil then fields[#fields + 1] = 'stance'; fields[#fields + 1] = target.old_stance end
if target.old_strength ~= nil then
  fields[#fields + 1] = 'strength'; fields[#fields + 1] = string.format('%.17g', target.old_strength)
end
-- Entries from before versions were kept describe an active preference.
local active = '1'
if target.old_active == false then active = '0' end
fields[#fields + 1] = 'active'; fields[#fields + 1] = active
if tonumber(target.old_reinforcement_count) then
  fields[#fields + 1] = 'reinforcement_count'
  fields[#fields + 1] = tostring(target.old_reinforcement_count)
end
local reason = ARGV[8]
if reason == '' then reason = 'restored version ' .. wanted end
add_history(fields, log, version_entry('restore', current,
  {opinion = h[3], stance = h[5], strength = h[4], active = h[6], count = h[10]},
  {new_opinion = opinion, timestamp = ARGV[7], reason = reason, restored = wanted}),
  tonumber(ARGV[9]), h[8])
with_next_rev(fields)
fix_past(fields, ARGV[7])
write_record(fields)
sync(h[1], {})
return {1, h[1], h[2], opinion, tostring(current + 1), active}
