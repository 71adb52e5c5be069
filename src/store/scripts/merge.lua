if not load_record(KEYS[1], KEYS[4]) or not load_record(KEYS[8], KEYS[4]) then return nil end
local names = {'id', 'name', 'opinion', 'strength', 'stance', 'active', 'reinforcement_count',
  'evidence_user_ids', 'reinforcements', 'evolution_history', 'history_entries_dropped', 'version',
  'related_user_ids', 'created_at', 'evidence_users_dropped', 'last_reinforced'}
local function read(key)
  local values = record_fields(key, KEYS[4], unpack(names))
  local record = {}
  for i, name in ipairs(names) do record[name] = values[i] end
  return record
end
local a, b = read(KEYS[1]), read(KEYS[8])
a.count, b.count = a.reinforcement_count, b.reinforcement_count
local function active(record) return record.active == '1' or record.active == 'true' end
if not active(a) or not active(b) then
  return {0, a.id, a.reinforcement_count or '0', a.strength or '0'}
end
local now, history_cap = ARGV[6], tonumber(ARGV[7])
local function union(first, second)
  local seen, out = {}, {}
  for _, list in ipairs({first, second}) do
    for _, item in ipairs(list) do
      if not seen[item] then seen[item] = true; out[#out + 1] = item end
    end
  end
  return out
end
local strength = math.max(tonumber(a.strength) or 0, tonumber(b.strength) or 0)
local count = (tonumber(a.reinforcement_count) or 0) + (tonumber(b.reinforcement_count) or 0) + 1
local evidence, evidence_dropped = newest(union(decode_list(a.evidence_user_ids),
  decode_list(b.evidence_user_ids)), tonumber(ARGV[8]))
local old_users = decode_list(a.related_user_ids)
local related = union(old_users, decode_list(b.related_user_ids))
local log = {}
for _, list in ipairs({decode_list(a.reinforcements), decode_list(b.reinforcements)}) do
  for _, entry in ipairs(list) do log[#log + 1] = entry end
end
table.sort(log, function(x, y) return (x.timestamp or '') < (y.timestamp or '') end)
local reinforcements = newest(log, tonumber(ARGV[9]))
local function earlier(x, y) if (x or '') == '' then return y or '' end if (y or '') == '' or x < y then return x end return y end
local function later(x, y) if (x or '') > (y or '') then return x or '' end return y or '' end
local a_history = decode_list(a.evolution_history)
local a_version = current_version(a.version, a_history, a.history_entries_dropped)
local fields = {'strength', string.format('%.17g', strength), 'reinforcement_count', tostring(count),
  'evidence_user_ids', encode_list(evidence),
  'evidence_users_dropped', tostring((tonumber(a.evidence_users_dropped) or 0) +
    (tonumber(b.evidence_users_dropped) or 0) + evidence_dropped),
  'related_user_ids', encode_list(related), 'related_user_ids_index', table.concat(related, ','),
  'reinforcements', encode_list(reinforcements),
  'created_at', earlier(a.created_at, b.created_at), 'last_reinforced', later(a.last_reinforced, b.last_reinforced),
  'version', tostring(a_version + 1), 'curated', '1'}
add_history(fields, a_history, version_entry('consolidation', a_version, a,
  {new_opinion = a.opinion or '', timestamp = now, merged = b.id,
   reason = 'merged near-duplicate ' .. b.id .. ': ' .. (b.opinion or '')}), history_cap, a.history_entries_dropped)
local b_history = decode_list(b.evolution_history)
local b_version = current_version(b.version, b_history, b.history_entries_dropped)
local b_fields = {'active', '0', 'version', tostring(b_version + 1)}
add_history(b_fields, b_history, version_entry('consolidation', b_version, b,
  {timestamp = now, merged_into = a.id, reason = 'merged into ' .. a.id .. ': ' .. (a.opinion or '')}),
  history_cap, b.history_entries_dropped)
with_next_rev(fields)
fix_past(fields, now)
with_next_rev(b_fields, KEYS[8])
fix_past(b_fields, now)
write_record(fields)
write_record(b_fields, KEYS[8])
sync(a.id, old_users)
sync(b.id, {}, KEYS[8])
return {1, a.id, tostring(count), string.format('%.17g', strength)}
