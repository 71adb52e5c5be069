-- Shared by every write script (scripts.rs), after record.lua: the lock check, the vector
-- set's fit, effect records, list helpers and `sync`, which writes a record back where it
-- belongs and keeps the persona's structures in step with it.
-- ARGV[4] is the quantisation and the build effort (VADD's EF), then " hash" when every
-- record keeps its hash (record.lua).
local QUANTISATION, BUILD_EF, KEEP_HASH = string.match(ARGV[4], '^(%S+) (%d+)(.*)$')
KEEP_HASH = KEEP_HASH ~= ''
local VECTOR_BYTES = tonumber(ARGV[5])
if ARGV[3] ~= '' and redis.call('GET', KEYS[3]) ~= ARGV[3] then
  return redis.error_reply('FENCED lock no longer held')
end
-- A vector set made under another size or quantisation would refuse VADD halfway through the
-- script, after the hash was written: refuse the whole write first.
if redis.call('EXISTS', KEYS[4]) == 1 then
  local info = redis.call('VINFO', KEYS[4])
  local quantisation, dims
  -- Status replies reach Lua as {ok = text}.
  local function text(value) if type(value) == 'table' then return value.ok end return value end
  for i = 1, #info, 2 do
    if text(info[i]) == 'quant-type' then quantisation = text(info[i + 1]) end
    if text(info[i]) == 'vector-dim' then dims = tonumber(text(info[i + 1])) end
  end
  local expected = ({Q8 = 'int8', NOQUANT = 'f32', BIN = 'bin'})[QUANTISATION]
  if dims == nil or dims * 4 ~= tonumber(ARGV[5]) or quantisation ~= expected then
    return redis.error_reply('MISFIT vector set ' .. KEYS[4] .. ' holds ' .. tostring(dims) ..
      '-dim ' .. tostring(quantisation) .. ' vectors, the configuration ' .. (tonumber(ARGV[5]) / 4) ..
      '-dim ' .. expected)
  end
end
local effect_used = ARGV[1] ~= ''
local function applied_before()
  if not effect_used then return nil end
  local existing = redis.call('HGET', KEYS[2], ARGV[1])
  if existing then return existing end
  return nil
end
local function record_effect_as(effect, value)
  redis.call('HSET', KEYS[2], effect, value)
  local ttl = tonumber(ARGV[2])
  if ttl > 0 then redis.call('HEXPIRE', KEYS[2], ttl, 'FIELDS', 1, effect) end
end
local function record_effect(value)
  if not effect_used then return end
  record_effect_as(ARGV[1], value)
end
-- A write to an existing preference: its effect record must name that preference, or the
-- record is not this write's (a collision or a corrupted record) and nothing is written.
local function applied_to(id)
  local existing = applied_before()
  if existing and existing ~= id then
    return redis.error_reply('EFFECT record ' .. ARGV[1] .. ' names preference ' .. existing ..
      ', not ' .. tostring(id))
  end
  return existing
end
-- The newest `cap` entries of a list, in order (one pass, whatever the list's length).
local function newest(list, cap)
  if #list <= cap then return list, 0 end
  local kept, dropped = {}, #list - cap
  for i = dropped + 1, #list do kept[#kept + 1] = list[i] end
  return kept, dropped
end
-- The evidence list with `user` added (keeping the most recent `cap`), encoded, and how many
-- users the cap dropped; nil when there is nothing to add.
local function evidence_with(raw, user, cap)
  if user == '' then return nil, 0 end
  local list = decode_list(raw)
  for _, existing in ipairs(list) do if existing == user then return nil, 0 end end
  list[#list + 1] = user
  local kept, dropped = newest(list, cap)
  return encode_list(kept), dropped
end
-- Appends `entry` to the history, keeps the newest `cap`, and adds the fields to write: the
-- history and, when entries were dropped, the new count of dropped entries.
local function add_history(fields, history, entry, cap, dropped_before)
  history[#history + 1] = entry
  local kept, dropped = newest(history, cap)
  fields[#fields + 1] = 'evolution_history'; fields[#fields + 1] = encode_list(kept)
  if dropped > 0 then
    fields[#fields + 1] = 'history_entries_dropped'
    fields[#fields + 1] = tostring((tonumber(dropped_before) or 0) + dropped)
  end
  return #kept + (tonumber(dropped_before) or 0) + dropped
end
-- The version a hash is at: its `version` field or, for records from before versions were
-- kept, one per history entry.
local function current_version(raw, history, dropped)
  return tonumber(raw) or (1 + #history + (tonumber(dropped) or 0))
end
-- A history entry keeping version `version` of a preference (read as `h` by `version_fields`);
-- `v.count`, when given, is that version's own reinforcements.
local function version_entry(action, version, v, extra)
  local entry = {action = action, version = version, old_opinion = v.opinion or '',
    old_stance = v.stance or '', old_strength = tonumber(v.strength) or 0,
    old_active = v.active == '1' or v.active == 'true',
    old_reinforcement_count = tonumber(v.count)}
  for name, value in pairs(extra) do entry[name] = value end
  return entry
end
-- Every write counts the record's revision up, so a replay written from an older read
-- (`APPLY`) is refused rather than lost over this write.
local function with_next_rev(fields, key)
  fields[#fields + 1] = 'rev'
  local r = load_record(key or KEYS[1], KEYS[4])
  fields[#fields + 1] = tostring((tonumber(r and r.rev) or 0) + 1)
end
-- A curation or an erasure fixes the preference's past (model::timeline): what ingest replayed
-- is replaced by this write, so its voicings go, and a voicing from before `now` that arrives
-- later lands nowhere. The record as written is where the next voicing's replay starts.
local function fix_past(fields, now)
  fields[#fields + 1] = 'voicings'; fields[#fields + 1] = ''
  fields[#fields + 1] = 'baseline'; fields[#fields + 1] = ''
  fields[#fields + 1] = 'voiced_from'; fields[#fields + 1] = now
end
-- A preference's vector lives in the persona's vector set only (quantised, with its links): a
-- second FP32 copy in the hash doubled what a preference costs (issue 32). The hash holds one
-- only while the preference is out of the set (retracted, parked there by `sync` so a restore
-- has it back) or does not fit it (awaiting migration). A write's new vector is held here
-- between `write_record` and `sync`.
local written_vectors = {}
-- Fields left out of a record while they hold their default, which every reader takes a
-- missing field for (`Preference::from_fields`, the timeline, these scripts): most preferences
-- have no related users, no history, no reinforcements yet, so their names and empty values
-- were about 200 of a hash's 1 300 bytes (measured on the demo's records, issue 32). Not
-- `reinforcement_count`: a history entry tells a count of 0 from an unknown one.
local DEFAULT_VALUES = {related_user_ids = '[]', related_user_ids_index = '',
  related_kg_uuids = '[]', evidence_user_ids = '[]', evidence_users_dropped = '0',
  evolution_history = '[]', history_entries_dropped = '0', inherited_from = '', curated = '0',
  reinforcements = '[]', baseline = '', voicings = ''}
-- Changes the record of `key` (a new one when there is none); `sync` writes it back, where it
-- belongs, so each write script ends in `sync` for every record it wrote.
local function write_record(fields, key)
  key = key or KEYS[1]
  local r = load_record(key, KEYS[4])
  if not r then
    r = {}
    loaded_records[key] = r
  end
  for i = 1, #fields, 2 do
    local name, value = fields[i], fields[i + 1]
    if name == 'embedding' then
      written_vectors[key] = value
    elseif DEFAULT_VALUES[name] == value then
      r[name] = nil
    else
      r[name] = value
    end
  end
end
-- Writes record `r` as the hash of `key`, replacing what was there (a field back at its
-- default goes with it).
local function write_hash(key, r)
  redis.call('DEL', key)
  local flat = {}
  for name, value in pairs(r) do flat[#flat + 1] = name; flat[#flat + 1] = value end
  if #flat > 0 then redis.call('HSET', key, unpack(flat)) end
end
-- The vector set's copy of a member, as FP32 bytes (dequantised: a Q8 copy comes back within
-- about 0.002 per component, cosine 0.99999 to the original).
local function vector_from_set(id)
  local values = redis.call('VEMB', KEYS[4], id)
  local parts = {}
  for i, value in ipairs(values) do parts[i] = struct.pack('<f', tonumber(value)) end
  return table.concat(parts)
end
-- A user's own vector set (`Keys::about_vectors`): the active preferences about that user, so
-- injection's user pass is one small search, not a read of every candidate. A user with fewer
-- than USER_SET_MIN preferences has none (reading so few costs less than a small set's bytes);
-- otherwise its members are exactly the user's entries in the about-set (`KEYS[6]`), which is
-- how injection knows to search it. Each member carries the persona set's attributes too, so
-- that search returns what injection ranks and renders (a set from before 2026-11-27 has
-- none: injection then reads them from the persona's set, until `index migrate` rebuilds it).
local function about_vectors(user) return KEYS[6] .. ':' .. user end
-- Puts member `id` into `user`'s vector set with `vector` (FP32 bytes) and `attributes`, those
-- it has in the persona's set (read from there when not given). A set that refuses it (made
-- under another size or quantisation) is dropped: injection then reads the user's candidates
-- one by one until a resync rebuilds it, never a wrong or partial answer.
local function add_about_vector(user, id, vector, attributes)
  local key = about_vectors(user)
  attributes = attributes or view_of_attributes(redis.call('VGETATTR', KEYS[4], id)) or ''
  local added = redis.pcall('VADD', key, 'FP32', vector, id, QUANTISATION, 'M', 8, 'EF', BUILD_EF,
    'SETATTR', attributes)
  if type(added) == 'table' and added.err then redis.call('DEL', key) end
end
-- Whether every member of a user's set carries its attributes (a set built before they were
-- kept there does not). Read by the rebuild of `index migrate` only.
local function about_attributes_whole(key)
  for _, member in ipairs(redis.call('VRANDMEMBER', key, redis.call('VCARD', key))) do
    if not redis.call('VGETATTR', key, member) then return false end
  end
  return true
end
-- After a write's about-entries for `user`: the user's set exists exactly when the user has at
-- least USER_SET_MIN entries, and then holds them all. A user reaching the threshold gets the
-- set built here (USER_SET_MIN additions, once). A set not whole otherwise (memory from
-- before these sets, or one dropped) is left to `rebuild` (`index migrate` settles every user
-- after resyncing every preference, so no write rebuilds a set the persona's own set cannot
-- fill yet); injection reads such a user's candidates meanwhile.
local function settle_about_vectors(user, rebuild)
  local key = about_vectors(user)
  local low, high = '[' .. user .. '\0', '(' .. user .. '\1'
  local entries = redis.call('ZLEXCOUNT', KEYS[6], low, high)
  if entries < USER_SET_MIN then
    redis.call('DEL', key)
    return
  end
  if redis.call('VCARD', key) == entries and not (rebuild and not about_attributes_whole(key)) then
    return
  end
  if not rebuild and entries ~= USER_SET_MIN then return end
  redis.call('DEL', key)
  for _, member in ipairs(redis.call('ZRANGEBYLEX', KEYS[6], low, high)) do
    local id = string.sub(member, #user + 2)
    if redis.call('VISMEMBER', KEYS[4], id) == 1 then
      add_about_vector(user, id, vector_from_set(id))
    end
  end
end
-- The plain fields of ARGV[first..] (name, value pairs) and the vector among them, for a
-- record the service encoded (`sync`'s `encoded`: add.lua, apply.lua).
local function argv_record(first)
  local r, vector = {}, nil
  for i = first, #ARGV, 2 do
    if ARGV[i] == 'embedding' then vector = ARGV[i + 1] else r[ARGV[i]] = ARGV[i + 1] end
  end
  return r, vector
end
-- Writes the record of preference `id` (`key`) back where it belongs (record.lua) and brings
-- the persona's structures in step with it after a write: `old_users` are the related users
-- before the write (their about-entries go). A vector this write gave (`write_record`) goes
-- into the vector set. `encoded`, when given, is an active record the service encoded, which
-- goes into the set or stays there (add.lua and apply.lua check it can): `record` its plain
-- fields, `whole` its attributes, `view` injection's view of them.
local function sync(id, old_users, key, encoded)
  key = key or KEYS[1]
  local r = (encoded and encoded.record) or load_record(key, KEYS[4])
  if not r then return end
  -- The vector to place: this write's, else one parked in the hash (or kept there by an
  -- earlier layout).
  local written = written_vectors[key]
  local vector = written or r.embedding
  local fits = vector and #vector == VECTOR_BYTES
  redis.call('SADD', KEYS[7], id)
  local users = decode_list(r.related_user_ids)
  local current = {}
  for _, user in ipairs(users) do current[user] = true end
  for _, user in ipairs(old_users) do
    redis.call('ZREM', KEYS[6], user .. '\0' .. id)
    if not current[user] then
      redis.call('VREM', about_vectors(user), id)
      settle_about_vectors(user, false)
    end
  end
  local member = redis.call('VISMEMBER', KEYS[4], id) == 1
  if r.active == '1' or r.active == 'true' then
    -- In the set after this write: a member keeps its place unless this write gave a new
    -- vector; otherwise only a vector that fits goes in. One that does not (data awaiting
    -- migration) is not searchable; the hash keeps it for the migration to see.
    local stays = member and not written
    local searchable = stays or fits
    local view = (encoded == nil) and injection_view(r)
    local attributes = (encoded and encoded.view) or cjson.encode(view)
    local element = attributes
    if searchable and not KEEP_HASH then
      element = (encoded and encoded.whole) or cjson.encode(whole_attributes(r, view))
    end
    if stays then
      redis.call('VSETATTR', KEYS[4], id, element)
    elseif fits then
      redis.call('VADD', KEYS[4], 'FP32', vector, id, QUANTISATION, 'EF', BUILD_EF,
        'SETATTR', element)
    elseif member then
      redis.call('VREM', KEYS[4], id)
    end
    if searchable and not KEEP_HASH then
      redis.call('DEL', key)
    else
      -- The vector is in the set now (added above, or already a member): the hash's copy
      -- (parked, or an earlier layout's) goes.
      if searchable then r.embedding = nil else r.embedding = vector end
      write_hash(key, r)
    end
    redis.call('ZADD', KEYS[5], tonumber(r.strength) or 0, id)
    for _, user in ipairs(users) do
      redis.call('ZADD', KEYS[6], 0, user .. '\0' .. id)
      -- A user's set gets the vector when the write gave one, or when the member is missing
      -- (a new relation); a reinforcement touches nothing. No set, none made here: settling
      -- makes one when the user has enough.
      local key = about_vectors(user)
      if not searchable then
        redis.call('VREM', key, id)
      elseif redis.call('EXISTS', key) == 1 then
        if (written and fits) or redis.call('VISMEMBER', key, id) == 0 then
          add_about_vector(user, id, (fits and vector) or vector_from_set(id), attributes)
        else
          -- A reinforcement or another change of the record: the copy of its attributes.
          redis.call('VSETATTR', key, id, attributes)
        end
      end
      settle_about_vectors(user, false)
    end
  else
    -- Out of the set: the hash keeps the record and the vector, so a restore can put it back.
    if written then
      r.embedding = written
    elseif member and not r.embedding then
      r.embedding = vector_from_set(id)
    end
    write_hash(key, r)
    redis.call('VREM', KEYS[4], id)
    redis.call('ZREM', KEYS[5], id)
    for _, user in ipairs(users) do
      redis.call('ZREM', KEYS[6], user .. '\0' .. id)
      redis.call('VREM', about_vectors(user), id)
      settle_about_vectors(user, false)
    end
  end
end
