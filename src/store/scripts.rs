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
-- Brings the persona's structures in step with the hash of preference `id` after a write.
-- `old_users`: the related users before the write (their about-entries go); `vector_changed`:
-- the embedding was written, so the vector set gets it again.
local function sync(id, old_users, vector_changed)
  local h = redis.call('HMGET', KEYS[1], 'active', 'name', 'opinion', 'category', 'strength',
    'stance', 'stance_at', 'related_user_ids', 'embedding')
  redis.call('SADD', KEYS[7], id)
  for _, user in ipairs(old_users) do redis.call('ZREM', KEYS[6], user .. '\0' .. id) end
  local users = decode_list(h[8])
  if h[1] == '1' or h[1] == 'true' then
    local strength = tonumber(h[5]) or 0
    local attributes = cjson.encode({n = h[2] or '', o = h[3] or '', c = h[4] or '', s = strength,
      st = h[6] or '', sa = h[7] or '', u = table.concat(users, ',')})
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
  'evolution_history', 'evidence_users_dropped', 'history_entries_dropped')
local log = decode_list(h[6])
local done = applied_to(h[1])
if type(done) == 'table' then return done end
if done then
  return {0, h[1], h[2], h[3], h[4] or '0', tostring(#log + (tonumber(h[8]) or 0))}
end
local fields = {'opinion', ARGV[6], 'embedding', ARGV[7], 'strength', ARGV[8],
  'last_reinforced', ARGV[9]}
local evolutions = add_history(fields, log, {action = 'evolution', old_opinion = h[3] or '',
  new_opinion = ARGV[6], timestamp = ARGV[9], reason = ARGV[10]}, tonumber(ARGV[15]), h[8])
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
redis.call('HSET', KEYS[1], unpack(fields))
record_effect(h[1])
sync(h[1], {}, true)
return {1, h[1], h[2], ARGV[6], ARGV[8], tostring(evolutions)}
"#
    ))
});

/// ARGV[6] reason ("" = no history entry), ARGV[7] now, ARGV[8] how many history entries to
/// keep. Returns nil when missing, else
/// `{applied, id, name}`.
pub static RETRACT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{GUARD}{}",
        r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return nil end
local h = redis.call('HMGET', KEYS[1], 'id', 'name', 'opinion', 'evolution_history',
  'history_entries_dropped')
local done = applied_to(h[1])
if type(done) == 'table' then return done end
if done then return {0, h[1], h[2]} end
local fields = {'active', '0'}
if ARGV[6] ~= '' then
  add_history(fields, decode_list(h[4]), {action = 'retraction', old_opinion = h[3] or '',
    timestamp = ARGV[7], reason = ARGV[6]}, tonumber(ARGV[8]), h[5])
end
redis.call('HSET', KEYS[1], unpack(fields))
record_effect(h[1])
sync(h[1], {}, false)
return {1, h[1], h[2]}
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
local h = redis.call('HMGET', KEYS[1], 'related_user_ids', 'evidence_user_ids', 'triggering_user_id', 'active', 'opinion', 'evolution_history', 'reinforcements', 'id', 'evidence_users_dropped', 'history_entries_dropped')
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
if not (related_changed or evidence_changed or triggering_changed or reinforcements_changed or history_changed) then return {0, 0} end
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
  fields[#fields + 1] = 'active'; fields[#fields + 1] = '0'
  add_history(fields, history, {action = 'retraction', old_opinion = h[5] or '', timestamp = ARGV[8],
    reason = 'erasure: its only evidence was an erased user'}, tonumber(ARGV[9]), h[10])
  retracted = 1
elseif history_changed then
  fields[#fields + 1] = 'evolution_history'; fields[#fields + 1] = encode_list(history)
end
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
redis.call('HSET', KEYS[1], 'embedding', ARGV[6])
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

/// Injection's three passes in one round trip, over the persona's own structures only.
/// `KEYS[1]` vector set, `KEYS[2]` strongest, `KEYS[3]` about-users. `ARGV[1]` the query
/// vector (FP32 bytes), `ARGV[2]` how many neighbours (k), `ARGV[3]` how many of the strongest,
/// `ARGV[4]` at most how many preferences about the users to score, `ARGV[5..]` the users.
///
/// Returns `{semantic, about_users, strongest}`:
/// - `semantic`: `VSIM … WITHSCORES WITHATTRIBS` (flat `id, score, attributes`);
/// - `about_users`: the k preferences about any of the users nearest to the query, flat
///   `id, cosine similarity, attributes`, scored here from their stored vectors (a filtered
///   VSIM walks the whole graph for a selective filter; these are few);
/// - `strongest`: flat `id, attributes`, strongest first.
pub static INJECT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local k = tonumber(ARGV[2])
local semantic = redis.call('VSIM', KEYS[1], 'FP32', ARGV[1], 'WITHSCORES', 'WITHATTRIBS', 'COUNT', k)
local about = {}
if #ARGV >= 5 then
  local cap = tonumber(ARGV[4])
  local seen, ids = {}, {}
  for i = 5, #ARGV do
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
        scored[#scored + 1] = {id, similarity}
      end
    end
    table.sort(scored, function(a, b) if a[2] == b[2] then return a[1] < b[1] end return a[2] > b[2] end)
    for i = 1, math.min(k, #scored) do
      about[#about + 1] = scored[i][1]
      about[#about + 1] = string.format('%.17g', scored[i][2])
      about[#about + 1] = redis.call('VGETATTR', KEYS[1], scored[i][1]) or ''
    end
  end
end
local strongest = {}
local n = tonumber(ARGV[3])
if n > 0 then
  for _, id in ipairs(redis.call('ZREVRANGE', KEYS[2], 0, n - 1)) do
    strongest[#strongest + 1] = id
    strongest[#strongest + 1] = redis.call('VGETATTR', KEYS[1], id) or ''
  end
end
return {semantic, about, strongest}
"#,
    )
});
