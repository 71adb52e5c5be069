if not load_record(KEYS[1], KEYS[4]) then return nil end
local user, pseudonym = ARGV[6], ARGV[7]
local h = record_fields(KEYS[1], KEYS[4], 'related_user_ids', 'evidence_user_ids', 'triggering_user_id', 'active', 'opinion', 'evolution_history', 'reinforcements', 'id', 'evidence_users_dropped', 'history_entries_dropped', 'version', 'stance', 'strength', 'reinforcement_count', 'voicings', 'baseline', 'name')
-- Texts that quote the user id (the opinion, the topic, every past version's, the reasons)
-- get the pseudonym too, where the id stands as a word of its own. Ids under 3 characters or
-- of digits only are left in texts: there they are far likelier a number or a word than the
-- user ("rated it 42 of 50").
local scrub_texts = #user >= 3 and not string.match(user, '^%d+$')
local function scrub(text)
  if type(text) ~= 'string' or not scrub_texts then return text, false end
  local out, changed, from = {}, false, 1
  while true do
    local at = string.find(text, user, from, true)
    if not at then break end
    local before = string.sub(text, at - 1, at - 1)
    local after = string.sub(text, at + #user, at + #user)
    if at > 1 and string.find(before, '[%w_]') or string.find(after, '[%w_]') then
      out[#out + 1] = string.sub(text, from, at + #user - 1)
    else
      out[#out + 1] = string.sub(text, from, at - 1)
      out[#out + 1] = pseudonym
      changed = true
    end
    from = at + #user
  end
  if not changed then return text, false end
  out[#out + 1] = string.sub(text, from)
  return table.concat(out), true
end
local opinion, opinion_changed = scrub(h[5])
local name, name_changed = scrub(h[17])
-- The list with the user replaced by the pseudonym, without duplicates: one pass, with a set
-- of what is kept (a nested scan was quadratic and blocked Redis on long lists).
local function replace(list)
  local out, kept, changed = {}, {}, false
  for _, value in ipairs(list) do
    local next_value = value
    if value == user then next_value = pseudonym; changed = true end
    if not kept[next_value] then
      kept[next_value] = true
      out[#out + 1] = next_value
    end
  end
  return out, changed
end
local old_related = decode_list(h[1])
local related, related_changed = replace(old_related)
local evidence, evidence_changed = replace(decode_list(h[2]))
local triggering = h[3] or ''
local triggering_changed = triggering == user
if triggering_changed then triggering = pseudonym end
local reinforcements = decode_list(h[7])
local reinforcements_changed = false
for _, entry in ipairs(reinforcements) do
  if entry.triggering_user_id == user then
    entry.triggering_user_id = pseudonym
    reinforcements_changed = true
  end
end
-- The reasons ingest writes for a change of mind name the user ("... from user <id>)").
local history = decode_list(h[6])
local history_changed = false
local named, renamed = 'from user ' .. user .. ')', 'from user ' .. pseudonym .. ')'
for _, entry in ipairs(history) do
  local reason = entry.reason
  if type(reason) == 'string' then
    local at = string.find(reason, named, 1, true)
    while at do
      reason = string.sub(reason, 1, at - 1) .. renamed .. string.sub(reason, at + #named)
      history_changed = true
      at = string.find(reason, named, at + #renamed, true)
    end
    entry.reason = reason
  end
  -- Past versions are kept to be restored: what they say must not name the user either.
  for _, field in ipairs({'reason', 'old_opinion', 'new_opinion'}) do
    local text, changed = scrub(entry[field])
    if changed then entry[field] = text; history_changed = true end
  end
end
-- The timeline (model::timeline) quotes each voicing's users; it is not rewritten piece by
-- piece: the erasure fixes the preference's past below, which drops it whole.
local function names_user(raw)
  -- record_fields answers false for a field the record does not have.
  return type(raw) == 'string' and raw ~= '' and string.find(raw, cjson.encode(user), 1, true) ~= nil
end
-- The timeline quotes what was said too: any mention of the id there drops it.
local function quotes_user(raw)
  return scrub_texts and type(raw) == 'string' and string.find(raw, user, 1, true) ~= nil
end
local timeline_changed = names_user(h[15]) or names_user(h[16]) or quotes_user(h[15]) or quotes_user(h[16])
if not (related_changed or evidence_changed or triggering_changed or reinforcements_changed or history_changed or timeline_changed or opinion_changed or name_changed) then return {0, 0} end
local only_evidence
if (tonumber(h[9]) or 0) > 0 then
  -- Evidence users beyond the cap were other users: the erased one was not the only one.
  only_evidence = false
elseif #evidence > 0 then
  only_evidence = true
  for _, value in ipairs(evidence) do if value ~= pseudonym then only_evidence = false end end
else
  only_evidence = triggering_changed
end
local fields = {'related_user_ids', encode_list(related), 'related_user_ids_index', table.concat(related, ','),
  'evidence_user_ids', encode_list(evidence), 'triggering_user_id', triggering,
  'reinforcements', encode_list(reinforcements)}
if opinion_changed then fields[#fields + 1] = 'opinion'; fields[#fields + 1] = opinion end
if name_changed then fields[#fields + 1] = 'name'; fields[#fields + 1] = name end
local retracted = 0
if only_evidence and h[4] == '1' then
  local version = current_version(h[11], history, h[10])
  fields[#fields + 1] = 'active'; fields[#fields + 1] = '0'
  fields[#fields + 1] = 'version'; fields[#fields + 1] = tostring(version + 1)
  add_history(fields, history, version_entry('retraction', version,
    {opinion = opinion, stance = h[12], strength = h[13], active = h[4], count = h[14]},
    {timestamp = ARGV[8], reason = 'erasure: its only evidence was an erased user'}), tonumber(ARGV[9]), h[10])
  retracted = 1
elseif history_changed then
  fields[#fields + 1] = 'evolution_history'; fields[#fields + 1] = encode_list(history)
end
with_next_rev(fields)
fix_past(fields, ARGV[8])
write_record(fields)
sync(h[8], old_related)
return {1, retracted}
