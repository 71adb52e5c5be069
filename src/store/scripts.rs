//! Lua scripts: every read-modify-write of a preference runs inside Redis as one script, so
//! concurrent writers (tasks or processes) cannot lose updates, and the idempotency record and
//! the lock check are part of the same atomic step as the write.
//!
//! Shared calling convention of the write scripts (every key declared, all in the persona's
//! hash slot, see `keys.rs`):
//! - `KEYS[1]` preference hash, `KEYS[2]` effect records (hash), `KEYS[3]` persona lock,
//!   `KEYS[4]` vector set, `KEYS[5]` strongest (sorted set), `KEYS[6]` about-users (sorted
//!   set), `KEYS[7]` every preference id (set);
//! - `ARGV[1]` the effect id ("" = none), `ARGV[2]` its TTL in seconds (0: none), `ARGV[3]`
//!   the lock token the caller holds ("" = no lock required), `ARGV[4]` the vector set's
//!   quantisation (`Q8`, `NOQUANT`, `BIN`), `ARGV[5]` the byte length of a vector that fits;
//! - operation-specific arguments from `ARGV[6]` on.
//!
//! A script answers with an error reply whose code is [`FENCED`] when the caller's lock is no
//! longer held (the write is refused rather than racing a newer holder), and [`MISFIT`] when
//! the persona's vector set does not fit the configuration (refused before anything is written).
//!
//! Each script writes the preference hash with a single `HSET` (RediSearch re-indexes the whole
//! document on every write command), then brings the persona's structures in step with the
//! hash in the same atomic step (`sync`): an active preference is in the vector set (with the
//! attributes injection reads), in `strongest` by its strength and in `about` under each related
//! user; a retracted one is in none of them. Reads come first, then writes.

use std::sync::LazyLock;

use redis::Script;

/// The error code a script answers with when the caller's lock is no longer held.
pub const FENCED: &str = "FENCED";
/// The error code a script answers with when the persona's vector set was made under another
/// size or quantisation than configured.
pub const MISFIT: &str = "MISFIT";
/// The error code a script answers with when the write's effect record names another
/// preference than the one written.
pub const EFFECT: &str = "EFFECT";
/// The error code [`APPLY`] answers with when the record changed since its timeline was read.
pub const CONFLICT: &str = "CONFLICT";

/// The guard shared by every script: lock check, then the idempotency short-circuit is done by
/// each script because what it returns differs.
const GUARD: &str = r#"
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
  local expected = ({Q8 = 'int8', NOQUANT = 'f32', BIN = 'bin'})[ARGV[4]]
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
local function decode_list(raw)
  if not raw or raw == '' or raw == '[]' or raw == '{}' then return {} end
  return cjson.decode(raw)
end
-- cjson writes an empty table as {}, so empty lists are written by hand.
local function encode_list(list)
  if #list == 0 then return '[]' end
  return cjson.encode(list)
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
  fields[#fields + 1] = tostring((tonumber(redis.call('HGET', key or KEYS[1], 'rev')) or 0) + 1)
end
-- A curation or an erasure fixes the preference's past (model::timeline): what ingest replayed
-- is replaced by this write, so its voicings go, and a voicing from before `now` that arrives
-- later lands nowhere. The record as written is where the next voicing's replay starts.
local function fix_past(fields, now)
  fields[#fields + 1] = 'voicings'; fields[#fields + 1] = ''
  fields[#fields + 1] = 'baseline'; fields[#fields + 1] = ''
  fields[#fields + 1] = 'voiced_from'; fields[#fields + 1] = now
end
-- Brings the persona's structures in step with the hash of preference `id` after a write.
-- `old_users`: the related users before the write (their about-entries go); `vector_changed`:
-- the embedding was written, so the vector set gets it again.
local function sync(id, old_users, vector_changed, key)
  local h = redis.call('HMGET', key or KEYS[1], 'active', 'name', 'opinion', 'category', 'strength',
    'stance', 'stance_at', 'related_user_ids', 'embedding', 'last_reinforced')
  redis.call('SADD', KEYS[7], id)
  for _, user in ipairs(old_users) do redis.call('ZREM', KEYS[6], user .. '\0' .. id) end
  local users = decode_list(h[8])
  if h[1] == '1' or h[1] == 'true' then
    local strength = tonumber(h[5]) or 0
    local attributes = cjson.encode({n = h[2] or '', o = h[3] or '', c = h[4] or '', s = strength,
      st = h[6] or '', sa = h[7] or '', u = table.concat(users, ','), lr = h[10] or ''})
    local member = redis.call('VISMEMBER', KEYS[4], id) == 1
    if vector_changed or not member then
      if h[9] and #h[9] == tonumber(ARGV[5]) then
        redis.call('VADD', KEYS[4], 'FP32', h[9], id, ARGV[4], 'SETATTR', attributes)
      elseif member then
        -- A vector that does not fit (data awaiting migration) is not searchable.
        redis.call('VREM', KEYS[4], id)
      end
    else
      redis.call('VSETATTR', KEYS[4], id, attributes)
    end
    redis.call('ZADD', KEYS[5], strength, id)
    for _, user in ipairs(users) do redis.call('ZADD', KEYS[6], 0, user .. '\0' .. id) end
  else
    redis.call('VREM', KEYS[4], id)
    redis.call('ZREM', KEYS[5], id)
    for _, user in ipairs(users) do redis.call('ZREM', KEYS[6], user .. '\0' .. id) end
  end
end
"#;

/// ARGV[6] the message's effect on the new preference, recorded too ("" = none); ARGV[7..]:
/// field/value pairs of the new hash (id first, so `ARGV[8]` is the id).
/// Returns `{applied, id}`: with an effect id applied before, the id it created.
pub static ADD: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{GUARD}{}",
        r#"
local existing = applied_before()
if existing then return {0, existing} end
local fields = {}
for i = 7, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(fields))
record_effect(ARGV[8])
if ARGV[6] ~= '' then record_effect_as(ARGV[6], ARGV[8]) end
sync(ARGV[8], {}, true)
return {1, ARGV[8]}
"#
    ))
});

/// Writes what ingest replayed from a preference's timeline (`model::timeline`): ARGV[6] the
/// revision the timeline was read at ("" for a record without one), ARGV[7] "1" when the
/// vector changed (the embedding is among the fields), ARGV[8..] field/value pairs. Refused
/// with [`CONFLICT`] when the record was written since it was read (the replay would undo that
/// write). Returns nil when missing, else `{applied, id}`.
pub static APPLY: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{GUARD}{}",
        r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return nil end
local h = redis.call('HMGET', KEYS[1], 'id', 'rev', 'related_user_ids')
local done = applied_to(h[1])
if type(done) == 'table' then return done end
if done then return {0, h[1]} end
if (h[2] or '') ~= ARGV[6] then
  return redis.error_reply('CONFLICT ' .. h[1])
end
local fields = {}
for i = 8, #ARGV do fields[#fields + 1] = ARGV[i] end
with_next_rev(fields)
redis.call('HSET', KEYS[1], unpack(fields))
record_effect(h[1])
sync(h[1], decode_list(h[3]), ARGV[7] == '1')
return {1, h[1]}
"#
    ))
});

/// ARGV[6] rate, ARGV[7] now, ARGV[8] the user whose conversation reinforced it ("" = none),
/// ARGV[9] the reinforcement's log entry (JSON), ARGV[10] how many log entries to keep,
/// ARGV[11] how many evidence users to keep.
/// Returns nil when missing, else
/// `{applied, id, name, strength, reinforcement_count}`.
pub static REINFORCE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{GUARD}{}",
        r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return nil end
local h = redis.call('HMGET', KEYS[1], 'id', 'name', 'strength', 'reinforcement_count',
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
local fields = {'strength', formatted, 'last_reinforced', ARGV[7], 'reinforcement_count', tostring(count)}
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
redis.call('HSET', KEYS[1], unpack(fields))
record_effect(h[1])
sync(h[1], {}, false)
return {1, h[1], h[2], formatted, tostring(count)}
"#
    ))
});

/// ARGV[6] new opinion, ARGV[7] embedding bytes, ARGV[8] strength, ARGV[9] now, ARGV[10]
/// reason, ARGV[11] new stance ("" keeps it), ARGV[12] when the new stance was expressed,
/// ARGV[13] the user whose conversation changed it ("" = none), ARGV[14] how many evidence
/// users to keep, ARGV[15] how many history entries to keep. Returns nil when missing, else
/// `{applied, id, name, opinion, strength, evolutions}`.
pub static EVOLVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{GUARD}{}",
        r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return nil end
local h = redis.call('HMGET', KEYS[1], 'id', 'name', 'opinion', 'strength', 'evidence_user_ids',
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
  'last_reinforced', ARGV[9], 'version', tostring(version + 1), 'reinforcement_count', '0'}
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
redis.call('HSET', KEYS[1], unpack(fields))
record_effect(h[1])
sync(h[1], {}, true)
return {1, h[1], h[2], ARGV[6], ARGV[8], tostring(evolutions)}
"#
    ))
});

/// ARGV[6] reason, ARGV[7] now, ARGV[8] how many history entries to keep. Every
/// retraction is a version in the history, so the preference can be restored. Returns nil when missing, else
/// `{applied, id, name}`.
pub static RETRACT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{GUARD}{}",
        r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return nil end
local h = redis.call('HMGET', KEYS[1], 'id', 'name', 'opinion', 'evolution_history',
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
redis.call('HSET', KEYS[1], unpack(fields))
record_effect(h[1])
sync(h[1], {}, false)
return {1, h[1], h[2]}
"#
    ))
});

/// Restores an earlier version of a preference from its history: its opinion, stance,
/// strength and whether it was active come back, as a new version (so a restore can itself be
/// undone). The topic and its vector stay. ARGV[6] the version, ARGV[7] now, ARGV[8] reason,
/// ARGV[9] how many history entries to keep. Returns nil when missing; `{-1, kept versions}`
/// when that version is not kept; else `{applied, id, name, opinion, version, active}`
/// (`applied` 0 when the preference is at that version already).
pub static RESTORE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{GUARD}{}",
        r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return nil end
local h = redis.call('HMGET', KEYS[1], 'id', 'name', 'opinion', 'strength', 'stance', 'active',
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
local fields = {'opinion', opinion, 'version', tostring(current + 1), 'stance_at', ARGV[7]}
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
redis.call('HSET', KEYS[1], unpack(fields))
sync(h[1], {}, false)
return {1, h[1], h[2], opinion, tostring(current + 1), active}
"#
    ))
});

/// Merges a near-duplicate into the preference of `KEYS[1]`: `KEYS[8]` is the duplicate's
/// hash. The survivor keeps the higher strength, the sum of both counts (plus the duplicate's
/// own first voicing), both sets of evidence and related users, the newest reinforcements of
/// both, the earlier creation and the later reinforcement; the duplicate is retracted. Each
/// gets a "consolidation" history entry naming the other. ARGV[6] now, ARGV[7] how many
/// history entries, ARGV[8] evidence users, ARGV[9] reinforcements to keep. Returns nil when
/// either is missing, else `{applied, survivor id, reinforcement_count, strength}` (`applied`
/// 0 when either is no longer active: merged before).
pub static MERGE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{GUARD}{}",
        r#"
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('EXISTS', KEYS[8]) == 0 then return nil end
local names = {'id', 'name', 'opinion', 'strength', 'stance', 'active', 'reinforcement_count',
  'evidence_user_ids', 'reinforcements', 'evolution_history', 'history_entries_dropped', 'version',
  'related_user_ids', 'created_at', 'evidence_users_dropped', 'last_reinforced'}
local function read(key)
  local values = redis.call('HMGET', key, unpack(names))
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
  'version', tostring(a_version + 1)}
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
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('HSET', KEYS[8], unpack(b_fields))
sync(a.id, old_users, false)
sync(b.id, {}, false, KEYS[8])
return {1, a.id, tostring(count), string.format('%.17g', strength)}
"#
    ))
});

/// Erasure of one user from one preference. ARGV[6] user id, ARGV[7] pseudonym, ARGV[8] now,
/// ARGV[9] how many history entries to keep.
/// Replaces the user in related users, evidence users, the triggering user, the users of the
/// reinforcement log and the reasons of the evolution history; retracts the
/// preference when that user's conversations were its only evidence. Returns nil when missing,
/// else `{changed, retracted}` (1/0 each).
pub static PURGE_USER: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{GUARD}{}",
        r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return nil end
local user, pseudonym = ARGV[6], ARGV[7]
local h = redis.call('HMGET', KEYS[1], 'related_user_ids', 'evidence_user_ids', 'triggering_user_id', 'active', 'opinion', 'evolution_history', 'reinforcements', 'id', 'evidence_users_dropped', 'history_entries_dropped', 'version', 'stance', 'strength', 'reinforcement_count', 'voicings', 'baseline')
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
end
-- The timeline (model::timeline) quotes each voicing's users; it is not rewritten piece by
-- piece: the erasure fixes the preference's past below, which drops it whole.
local function names_user(raw)
  -- HMGET answers false for a field the hash does not have.
  return type(raw) == 'string' and raw ~= '' and string.find(raw, cjson.encode(user), 1, true) ~= nil
end
local timeline_changed = names_user(h[15]) or names_user(h[16])
if not (related_changed or evidence_changed or triggering_changed or reinforcements_changed or history_changed or timeline_changed) then return {0, 0} end
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
local retracted = 0
if only_evidence and h[4] == '1' then
  local version = current_version(h[11], history, h[10])
  fields[#fields + 1] = 'active'; fields[#fields + 1] = '0'
  fields[#fields + 1] = 'version'; fields[#fields + 1] = tostring(version + 1)
  add_history(fields, history, version_entry('retraction', version,
    {opinion = h[5], stance = h[12], strength = h[13], active = h[4], count = h[14]},
    {timestamp = ARGV[8], reason = 'erasure: its only evidence was an erased user'}), tonumber(ARGV[9]), h[10])
  retracted = 1
elseif history_changed then
  fields[#fields + 1] = 'evolution_history'; fields[#fields + 1] = encode_list(history)
end
with_next_rev(fields)
fix_past(fields, ARGV[8])
redis.call('HSET', KEYS[1], unpack(fields))
sync(h[8], old_related, false)
return {1, retracted}
"#
    ))
});

/// Migration: sets a hash's embedding only if the hash still exists (HSET alone would create a
/// stub hash for a preference deleted meanwhile), and puts the new vector in the vector set.
/// ARGV[6] the vector, ARGV[7] the preference id. Returns 1 when written.
pub static SET_EMBEDDING: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{GUARD}{}",
        r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local fields = {'embedding', ARGV[6]}
with_next_rev(fields)
redis.call('HSET', KEYS[1], unpack(fields))
sync(ARGV[7], {}, true)
return 1
"#
    ))
});

/// Migration: writes a preference hash read from an earlier layout under its key in this one,
/// with its structures, unless it is there already. ARGV[6..] field/value pairs (id first).
/// Returns 1 when written, 0 when the key already existed (an earlier run got this far).
pub static IMPORT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{GUARD}{}",
        r#"
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local fields = {}
for i = 6, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(fields))
sync(ARGV[7], {}, true)
return 1
"#
    ))
});

/// Migration: brings the structures in step with an existing hash (a run cut short, or a
/// change of quantisation that emptied the vector set). ARGV[6] the preference id. Returns 1,
/// or 0 when the hash is gone.
pub static RESYNC: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{GUARD}{}",
        r#"
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
sync(ARGV[6], {}, true)
return 1
"#
    ))
});

/// Injection's three passes in one round trip, over one persona's own structures only.
/// How far the injection script walks down a persona's `strongest` for its residents when
/// decay may have reordered them (see [`INJECT`]). Each read costs about 5 µs in the script
/// (`benches/store.rs`: 1 000 reads took 5.2 ms p50), so this bounds the cost of a persona
/// whose strong views have all faded (1.6 ms p50 at this limit, against 0.4 ms without
/// residents, in the same run); past it the residents are the best of the strongest this
/// many by stored strength (the old selection read only `2·resident_count + max_count`, 14
/// by default).
pub const RESIDENT_WALK_LIMIT: usize = 256;

/// `KEYS[1]` vector set, `KEYS[2]` strongest, `KEYS[3]` about-users, `KEYS[4]` the persona's
/// bases. `ARGV[1]` the query vector (FP32 bytes; empty for none: no semantic pass, and the
/// user pass strongest first), `ARGV[2]` how many neighbours (k), `ARGV[3]` how many of the
/// strongest, `ARGV[4]` at most how many preferences about the users to score, `ARGV[5]` "1"
/// to also return the vector of every hit (a base layer's, for the override check),
/// `ARGV[6]` the search's exploration factor (`store.vector_search_ef`), `ARGV[7]` the
/// strength half-life in days (0: no decay), `ARGV[8]` now, in days since the Unix epoch,
/// `ARGV[9..]` the users.
///
/// Returns `{semantic, about_users, strongest, bases, vectors}`:
/// - `semantic`: `VSIM … WITHSCORES WITHATTRIBS` (flat `id, score, attributes`);
/// - `about_users`: the k preferences about any of the users nearest to the query, flat
///   `id, cosine similarity, attributes`, scored here from their stored vectors (a filtered
///   VSIM walks the whole graph for a selective filter; these are few);
/// - `strongest`: flat `id, attributes`, the `ARGV[3]` strongest by decayed strength (ties by
///   id). Decay never raises a strength, so the walk down `strongest` (stored strength) stops
///   once the next stored strength is below the last of those kept: what lies further cannot
///   enter, and the choice is exact. The walk reads at most [`RESIDENT_WALK_LIMIT`] entries (a
///   persona whose strong views have all faded is read that far, and the best of those are
///   kept);
/// - `bases`: the persona's bases, comma-separated ("" for none), so a persona without bases
///   costs no second round trip;
/// - `vectors`: flat `id, VEMB reply` for every hit above when `ARGV[5]` is "1".
pub static INJECT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        &r#"
local k = tonumber(ARGV[2])
-- No query vector (a short or empty query): no semantic pass; the user pass ranks by strength.
local semantic = {}
if ARGV[1] ~= '' then
  semantic = redis.call('VSIM', KEYS[1], 'FP32', ARGV[1], 'WITHSCORES', 'WITHATTRIBS', 'COUNT', k, 'EF', ARGV[6])
end
local about = {}
if #ARGV >= 9 then
  local cap = tonumber(ARGV[4])
  local seen, ids = {}, {}
  for i = 9, #ARGV do
    local members = redis.call('ZRANGEBYLEX', KEYS[3], '[' .. ARGV[i] .. '\0', '(' .. ARGV[i] .. '\1', 'LIMIT', 0, cap)
    for _, member in ipairs(members) do
      local id = string.sub(member, #ARGV[i] + 2)
      if not seen[id] and #ids < cap then seen[id] = true; ids[#ids + 1] = id end
    end
  end
  if #ids > 0 then
    local query, norm, position = {}, 0, 1
    local dims = #ARGV[1] / 4
    for d = 1, dims do
      local value
      value, position = struct.unpack('<f', ARGV[1], position)
      query[d] = value
      norm = norm + value * value
    end
    local scored = {}
    for _, id in ipairs(ids) do
      if dims == 0 then
        -- Nothing to be near to: the strongest first (similarity 0, strength breaks the tie).
        local strength = tonumber(redis.call('ZSCORE', KEYS[2], id))
        if strength then scored[#scored + 1] = {id, 0, strength} end
      else
        local vector = redis.call('VEMB', KEYS[1], id)
        if vector and #vector == dims then
          local dot, own = 0, 0
          for d = 1, dims do
            local value = vector[d]
            if type(value) == 'table' then value = value.double else value = tonumber(value) end
            dot = dot + value * query[d]
            own = own + value * value
          end
          local similarity = 0
          if own > 0 and norm > 0 then similarity = dot / math.sqrt(own * norm) end
          scored[#scored + 1] = {id, similarity, 0}
        end
      end
    end
    table.sort(scored, function(a, b)
      if a[2] ~= b[2] then return a[2] > b[2] end
      if a[3] ~= b[3] then return a[3] > b[3] end
      return a[1] < b[1]
    end)
    for i = 1, math.min(k, #scored) do
      about[#about + 1] = scored[i][1]
      about[#about + 1] = string.format('%.17g', scored[i][2])
      about[#about + 1] = redis.call('VGETATTR', KEYS[1], scored[i][1]) or ''
    end
  end
end
local strongest = {}
local n = tonumber(ARGV[3])
local half_life, now = tonumber(ARGV[7]), tonumber(ARGV[8])
-- Days since the Unix epoch of an RFC 3339 time, nil when it is not one (then, as in
-- `decayed_strength`, whose parser accepts the same forms, the strength does not decay).
local function days_of(text)
  if type(text) ~= 'string' then return nil end
  local y, mo, d, h, mi, s = string.match(text, '^(%d%d%d%d)-(%d%d)-(%d%d)[Tt](%d%d):(%d%d):(%d%d)')
  if not y then return nil end
  y, mo, d = tonumber(y), tonumber(mo), tonumber(d)
  local seconds = tonumber(h) * 3600 + tonumber(mi) * 60 + tonumber(s)
  local fraction = string.match(text, '^%.(%d+)', 20)
  if fraction then seconds = seconds + tonumber('0.' .. fraction) end
  local sign, oh, om = string.match(text, '([%+%-])(%d%d):(%d%d)$')
  if sign then
    local offset = tonumber(oh) * 3600 + tonumber(om) * 60
    if sign == '+' then seconds = seconds - offset else seconds = seconds + offset end
  elseif not string.match(text, '[Zz]$') then
    return nil
  end
  -- Days from the civil date (H. Hinnant's algorithm).
  if mo <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local doy = math.floor((153 * ((mo + 9) % 12) + 2) / 5) + d - 1
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  return era * 146097 + doe - 719468 + seconds / 86400
end
if n > 0 and half_life <= 0 then
  for _, id in ipairs(redis.call('ZREVRANGE', KEYS[2], 0, n - 1)) do
    strongest[#strongest + 1] = id
    strongest[#strongest + 1] = redis.call('VGETATTR', KEYS[1], id) or ''
  end
elseif n > 0 then
  local kept = {}
  local page, read, limit = math.max(2 * n, 16), 0, RESIDENT_WALK_LIMIT
  local function better(a, b)
    if a[2] ~= b[2] then return a[2] > b[2] end
    return a[1] < b[1]
  end
  local done = false
  while not done and read < limit do
    local members = redis.call('ZREVRANGE', KEYS[2], read, read + page - 1, 'WITHSCORES')
    if #members == 0 then break end
    for i = 1, #members, 2 do
      local id, stored = members[i], tonumber(members[i + 1])
      if #kept >= n and stored < kept[n][2] then done = true; break end
      local attributes = redis.call('VGETATTR', KEYS[1], id) or ''
      local decayed = stored
      -- The times are read by pattern, not by decoding the whole attributes: an escaped quote
      -- inside another field cannot look like `"lr":"`.
      local voiced = string.match(attributes, '"lr":"([^"]*)"')
      if not voiced or voiced == '' then voiced = string.match(attributes, '"sa":"([^"]*)"') end
      local t = days_of(voiced)
      if t then decayed = stored * 0.5 ^ (math.max(now - t, 0) / half_life) end
      if #kept < n or better({id, decayed}, kept[#kept]) then
        -- Insertion keeps `kept` ordered, best first.
        local entry, at = {id, decayed, attributes}, #kept + 1
        while at > 1 and better(entry, kept[at - 1]) do
          kept[at] = kept[at - 1]
          at = at - 1
        end
        kept[at] = entry
        if #kept > n then kept[#kept] = nil end
      end
      read = read + 1
      if read >= limit then break end
    end
    if #members < 2 * page then break end
  end
  for _, entry in ipairs(kept) do
    strongest[#strongest + 1] = entry[1]
    strongest[#strongest + 1] = entry[3]
  end
end
local vectors = {}
if ARGV[5] == '1' then
  local seen = {}
  local function add(id)
    if seen[id] then return end
    seen[id] = true
    local vector = redis.call('VEMB', KEYS[1], id)
    if vector then vectors[#vectors + 1] = id; vectors[#vectors + 1] = vector end
  end
  for i = 1, #semantic do
    -- RESP2 flat triples; a RESP3 map arrives as a flat list too in Lua.
    if i % 3 == 1 then add(semantic[i]) end
  end
  for i = 1, #about, 3 do add(about[i]) end
  for i = 1, #strongest, 2 do add(strongest[i]) end
end
return {semantic, about, strongest, redis.call('GET', KEYS[4]) or '', vectors}
"#
            .replace("RESIDENT_WALK_LIMIT", &RESIDENT_WALK_LIMIT.to_string()),
    )
});
