-- Where a preference's record lives, and its two encodings (shared by every write script and
-- by READ; scripts.rs). An active preference whose vector is in the persona's vector set keeps
-- its whole record once, as its element's attributes there (issue 32: the hash beside it held
-- every field a second time, about 1 000 bytes a preference). Any other (retracted, or with a
-- vector that does not fit the set, awaiting migration) keeps it in its hash, with its vector
-- parked there. With the opt-in full-text index the hash is kept for every preference, since
-- RediSearch indexes hashes only. Wherever both exist, the hash is the record.
local function decode_list(raw)
  if not raw or raw == '' or raw == '[]' or raw == '{}' then return {} end
  return cjson.decode(raw)
end
-- cjson writes an empty table as {}, so empty lists are written by hand.
local function encode_list(list)
  if #list == 0 then return '[]' end
  return cjson.encode(list)
end
-- A preference key is `<prefix>:persona_pref:{<persona>}:<id>`: neither the prefix nor a
-- persona id holds a brace (keys.rs), so the first "}:" ends the persona.
local function id_of_key(key)
  return string.sub(key, (string.find(key, '}:', 1, true)) + 2)
end
local function persona_of_key(key)
  return string.match(key, '{([^}]*)}')
end
-- The record's fields beyond what injection reads, by their short names in an element's
-- attributes. A field not named here (one of an earlier system) goes under `x` by its own
-- name, so nothing a hash held is lost on the way in.
local SHORT_NAMES = {triggering_user_id = 'tu', triggering_message_id = 'tm',
  persona_message_id = 'pm', source_platform = 'sp', source_channel_id = 'sc',
  related_kg_uuids = 'kg', evidence_user_ids = 'eu', evolution_history = 'eh', created_at = 'ca',
  reinforcements = 'rf', evidence_users_dropped = 'ed', history_entries_dropped = 'hd',
  version = 'v', inherited_from = 'if', voicings = 'vo', baseline = 'bl', voiced_from = 'vf',
  rev = 'rv'}
local LONG_NAMES = {}
for long, short in pairs(SHORT_NAMES) do LONG_NAMES[short] = long end
-- Fields that hold JSON of their own. Kept as text inside the attributes' JSON, every quote of
-- theirs would be escaped (a first voicing alone has about 40). Written with quotes and
-- apostrophes swapped (a bijection, undone on read), their structural quotes cost nothing and
-- an apostrophe in a text costs the escape instead. `w` = 2 marks attributes written so; 1,
-- attributes written before (read as they are, and re-encoded at their next write).
local QUOTES_SWAPPED = {kg = true, eu = true, eh = true, rf = true, vo = true, bl = true}
local QUOTE_SWAP = {['"'] = "'", ["'"] = '"'}
local function swap_quotes(text)
  if type(text) ~= 'string' then return text end
  return (string.gsub(text, '["\']', QUOTE_SWAP))
end
-- Fields an element's attributes say in injection's own terms (`injection_view`), or that
-- its key says (id, persona), or that being in the set says (active); never copied as such.
local VIEWED = {id = true, persona_id = true, active = true, embedding = true, name = true,
  opinion = true, category = true, strength = true, stance = true, stance_at = true,
  last_reinforced = true, related_user_ids = true, related_user_ids_index = true,
  reinforcement_count = true, curated = true}
-- What injection and deciding read of an active record (`VectorAttributes` in record.rs):
-- topic, opinion, category, strength, stance and when, the last voicing, related users, the
-- current version's reinforcements, curated. Fields at their default are left out (every
-- reader takes a missing one for it): no related users, never reinforced, not curated, and the
-- last voicing while it is the stance's own (a missing `lr` reads as `sa`).
-- The strength is kept as the record's own text, so it reads back exactly (a JSON number
-- here carries 14 digits, and a reinforced strength often has 17).
local function injection_view(r)
  local strength = r.strength
  if not tonumber(strength) then strength = '0' end
  local view = {n = r.name or '', o = r.opinion or '', c = r.category or '', s = strength,
    st = r.stance or '', sa = r.stance_at or ''}
  if (r.last_reinforced or '') ~= view.sa then view.lr = r.last_reinforced or '' end
  local users = decode_list(r.related_user_ids)
  if #users > 0 then view.u = table.concat(users, ',') end
  local reinforcements = tonumber(r.reinforcement_count) or 0
  if reinforcements ~= 0 then view.rc = reinforcements end
  if r.curated == '1' then view.cu = true end
  return view
end
-- A preference voiced once holds its one voicing twice: as its timeline (`voicings`) and as
-- its own fields, which that voicing created (topic, opinion, category, stance and when,
-- strength, provenance, who and what it is about). About 230 of an element's 500 bytes.
-- When the voicing says exactly what the record's fields say, the attributes keep `vr` = 1
-- in its place and the voicing is written back from the fields on read; any difference, or
-- a field a voicing may hold that is not named here, keeps the voicing as it is.
local VOICING_FIELDS = {at = 'stance_at', st = 'stance', n = 'name', o = 'opinion',
  c = 'category', tu = 'triggering_user_id', tm = 'triggering_message_id',
  pm = 'persona_message_id', sp = 'source_platform', sc = 'source_channel_id'}
local VOICING_LISTS = {ru = 'related_user_ids', kg = 'related_kg_uuids'}
-- The strength is written back as the record's own text, so it must be JSON's number form.
local function json_number(text)
  return type(text) == 'string' and (string.match(text, '^%-?%d+$') ~= nil
    or string.match(text, '^%-?%d+%.%d+$') ~= nil)
end
local function same_list(list, raw)
  local other = decode_list(raw)
  if #list ~= #other then return false end
  for i = 1, #list do
    if list[i] ~= other[i] then return false end
  end
  return true
end
local function voicing_is_the_records(r)
  local raw = r.voicings
  if type(raw) ~= 'string' or string.sub(raw, 1, 2) ~= '[{' then return false end
  -- A list of two or more has `},{` between its voicings (serde writes no spaces): not
  -- decoded, since every write of a preference voiced up to `max_voicings` (32) times comes
  -- here. A text holding `},{` only costs that voicing its shorter form.
  if string.find(raw, '},{', 1, true) then return false end
  local ok, list = pcall(cjson.decode, raw)
  if not ok or type(list) ~= 'table' or #list ~= 1 or type(list[1]) ~= 'table' then
    return false
  end
  local voicing = list[1]
  if not json_number(r.strength) or type(voicing.s) ~= 'number'
    or tonumber(r.strength) ~= voicing.s then
    return false
  end
  for name, value in pairs(voicing) do
    if VOICING_FIELDS[name] then
      if type(value) ~= 'string' or value == '' or value ~= r[VOICING_FIELDS[name]] then
        return false
      end
    elseif VOICING_LISTS[name] then
      if type(value) ~= 'table' or #value == 0 or not same_list(value, r[VOICING_LISTS[name]]) then
        return false
      end
    elseif name ~= 's' then
      return false
    end
  end
  -- A field the voicing leaves out must be empty in the record too.
  for short, long in pairs(VOICING_FIELDS) do
    if voicing[short] == nil and (r[long] or '') ~= '' then return false end
  end
  for short, long in pairs(VOICING_LISTS) do
    if voicing[short] == nil and #decode_list(r[long]) > 0 then return false end
  end
  return true
end
-- The one voicing a record's fields say (`vr`), as the timeline holds it.
local function the_records_voicing(r)
  local voicing = {}
  for short, long in pairs(VOICING_FIELDS) do
    if (r[long] or '') ~= '' then voicing[short] = r[long] end
  end
  for short, long in pairs(VOICING_LISTS) do
    local list = decode_list(r[long])
    if #list > 0 then voicing[short] = list end
  end
  return '[{"s":' .. r.strength .. ',' .. string.sub(cjson.encode(voicing), 2) .. ']'
end
-- The whole record as an element's attributes: injection's view, the other fields by short
-- name (those holding JSON with their quotes swapped, above), and `w` marking it whole. A
-- record without a reinforcement count says so (`rn`), since a history entry tells an unknown
-- count from 0. The first version of a preference never changed (no history) leaves its
-- version out: every reader counts a missing version as 1 plus the history's entries.
-- `view` is `injection_view(r)`, which this extends in place (a write encodes the view first,
-- for the users' own sets, so it is computed once).
local function whole_attributes(r, view)
  local a = view
  a.w = 2
  if r.strength == nil then a.s = nil end
  if r.reinforcement_count == nil then a.rn = 1 end
  local first_version = r.version == '1' and r.evolution_history == nil
    and r.history_entries_dropped == nil
  -- Checked before the copy, so the voicing left out is not swapped for nothing.
  if voicing_is_the_records(r) then a.vr = 1 end
  for name, value in pairs(r) do
    if not VIEWED[name] and not (name == 'version' and first_version)
      and not (name == 'voicings' and a.vr) then
      local short = SHORT_NAMES[name]
      if short and QUOTES_SWAPPED[short] then
        a[short] = swap_quotes(value)
      elseif short then
        a[short] = value
      else
        a.x = a.x or {}
        a.x[name] = value
      end
    end
  end
  return a
end
-- The record an element's whole attributes hold (nil for attributes that are a view only).
local function record_from_attributes(raw, key)
  local ok, a = pcall(cjson.decode, raw)
  if not ok or type(a) ~= 'table' or a.w == nil then return nil end
  local r = {id = id_of_key(key), persona_id = persona_of_key(key), active = '1'}
  local function text(value) if value ~= nil and value ~= '' then return value end return nil end
  r.name, r.opinion, r.category = text(a.n), text(a.o), text(a.c)
  if type(a.s) == 'number' then r.strength = tostring(a.s) else r.strength = a.s end
  r.stance, r.stance_at = text(a.st), text(a.sa)
  r.last_reinforced = text(a.lr or a.sa)
  if a.u and a.u ~= '' then
    local users = {}
    for user in string.gmatch(a.u, '[^,]+') do users[#users + 1] = user end
    r.related_user_ids = encode_list(users)
    r.related_user_ids_index = a.u
  end
  if not a.rn then r.reinforcement_count = tostring(a.rc or 0) end
  if a.cu then r.curated = '1' end
  local swapped = a.w == 2
  for short, value in pairs(a) do
    local long = LONG_NAMES[short]
    if long and swapped and QUOTES_SWAPPED[short] then
      r[long] = swap_quotes(value)
    elseif long then
      r[long] = value
    end
  end
  if type(a.x) == 'table' then
    for name, value in pairs(a.x) do r[name] = value end
  end
  if a.vr then r.voicings = the_records_voicing(r) end
  return r
end
-- Injection's view of raw attributes (a user's own set copies only that).
local function view_of_attributes(raw)
  if not raw or raw == '' then return raw end
  local ok, a = pcall(cjson.decode, raw)
  if not ok or type(a) ~= 'table' or a.w == nil then return raw end
  local view = {}
  for _, name in ipairs({'n', 'o', 'c', 's', 'st', 'sa', 'lr', 'u', 'rc', 'cu'}) do view[name] = a[name] end
  return cjson.encode(view)
end
-- Records read in this script, by key (false: none), so every read and write of one
-- preference sees one record, and `sync` writes it back where it belongs.
local loaded_records = {}
local function load_record(key, vectors)
  local cached = loaded_records[key]
  if cached ~= nil then return cached end
  local record = false
  local flat = redis.call('HGETALL', key)
  if #flat > 0 then
    record = {}
    for i = 1, #flat, 2 do record[flat[i]] = flat[i + 1] end
  else
    local raw = redis.call('VGETATTR', vectors, id_of_key(key))
    if raw then record = record_from_attributes(raw, key) or false end
  end
  loaded_records[key] = record
  return record
end
-- The record's fields in the order named, as HMGET answers (false for a missing one).
local function record_fields(key, vectors, ...)
  local r = load_record(key, vectors)
  local values = {}
  for i, name in ipairs({...}) do
    local value = r and r[name]
    if value == nil then value = false end
    values[i] = value
  end
  return values
end
