//! Lua scripts: every read-modify-write of a preference runs inside Redis as one script, so
//! concurrent writers (tasks or processes) cannot lose updates, and the idempotency record and
//! the lock check are part of the same atomic step as the write.
//!
//! Shared calling convention:
//! - `KEYS[1]` preference key, `KEYS[2]` idempotency ("effect") key, `KEYS[3]` persona lock key;
//! - `ARGV[1]` "1" when the effect key is in use, `ARGV[2]` its TTL in seconds (0: none),
//!   `ARGV[3]` the lock token the caller holds ("" = no lock required);
//! - operation-specific arguments from `ARGV[4]` on.
//!
//! A script answers `FENCED` (an error reply) when the caller's lock is no longer held: the
//! write is refused rather than racing a newer holder.
//!
//! Each script writes the preference hash with a single `HSET`: RediSearch re-indexes the whole
//! document (vector included) on every write command, so four small writes cost four
//! re-indexings. Reads come first, then one write.

use std::sync::LazyLock;

use redis::Script;

/// The guard shared by every script: lock check, then the idempotency short-circuit is done by
/// each script because what it returns differs.
const GUARD: &str = r#"
if ARGV[3] ~= '' and redis.call('GET', KEYS[3]) ~= ARGV[3] then
  return redis.error_reply('FENCED lock no longer held')
end
local effect_used = ARGV[1] == '1'
local function record_effect(value)
  if not effect_used then return end
  local ttl = tonumber(ARGV[2])
  if ttl > 0 then redis.call('SET', KEYS[2], value, 'EX', ttl) else redis.call('SET', KEYS[2], value) end
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
-- The evidence list with `user` added, encoded, or nil when there is nothing to add.
local function evidence_with(raw, user)
  if user == '' then return nil end
  local list = decode_list(raw)
  for _, existing in ipairs(list) do if existing == user then return nil end end
  list[#list + 1] = user
  return encode_list(list)
end
"#;

/// ARGV[4..]: field/value pairs of the new hash (id first). Returns `{applied, id}`.
pub static ADD: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{GUARD}{}",
        r#"
if effect_used then
  local existing = redis.call('GET', KEYS[2])
  if existing then return {0, existing} end
end
local fields = {}
for i = 4, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(fields))
record_effect(ARGV[5])
return {1, ARGV[5]}
"#
    ))
});

/// ARGV[4] rate, ARGV[5] now, ARGV[6] the user whose conversation reinforced it ("" = none),
/// ARGV[7] the reinforcement's log entry (JSON), ARGV[8] how many log entries to keep.
/// Returns nil when missing, else
/// `{applied, id, name, strength, reinforcement_count}`.
pub static REINFORCE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{GUARD}{}",
        r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return nil end
local h = redis.call('HMGET', KEYS[1], 'id', 'name', 'strength', 'reinforcement_count',
  'evidence_user_ids', 'reinforcements')
if effect_used and redis.call('EXISTS', KEYS[2]) == 1 then
  return {0, h[1], h[2], h[3] or '0', h[4] or '0'}
end
local strength = tonumber(h[3]) or 0
local rate = tonumber(ARGV[4])
strength = strength + rate * (1 - strength)
if strength > 1 then strength = 1 end
if strength < 0 then strength = 0 end
local count = (tonumber(h[4]) or 0) + 1
local formatted = string.format('%.17g', strength)
local fields = {'strength', formatted, 'last_reinforced', ARGV[5], 'reinforcement_count', tostring(count)}
local evidence = evidence_with(h[5], ARGV[6])
if evidence then
  fields[#fields + 1] = 'evidence_user_ids'
  fields[#fields + 1] = evidence
end
local keep = tonumber(ARGV[8])
if keep > 0 then
  local log = decode_list(h[6])
  log[#log + 1] = cjson.decode(ARGV[7])
  while #log > keep do table.remove(log, 1) end
  fields[#fields + 1] = 'reinforcements'
  fields[#fields + 1] = encode_list(log)
end
redis.call('HSET', KEYS[1], unpack(fields))
record_effect(h[1])
return {1, h[1], h[2], formatted, tostring(count)}
"#
    ))
});

/// ARGV[4] new opinion, ARGV[5] embedding bytes, ARGV[6] strength, ARGV[7] now, ARGV[8] reason,
/// ARGV[9] new stance ("" keeps it), ARGV[10] when the new stance was expressed, ARGV[11] the
/// user whose conversation changed it ("" = none). Returns nil when missing, else
/// `{applied, id, name, opinion, strength, evolutions}`.
pub static EVOLVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{GUARD}{}",
        r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return nil end
local function history()
  local raw = redis.call('HGET', KEYS[1], 'evolution_history')
  if not raw or raw == '' or raw == '[]' or raw == '{}' then return {} end
  return cjson.decode(raw)
end
if effect_used and redis.call('EXISTS', KEYS[2]) == 1 then
  local h = redis.call('HMGET', KEYS[1], 'id', 'name', 'opinion', 'strength')
  return {0, h[1], h[2], h[3], h[4] or '0', tostring(#history())}
end
local log = history()
local h = redis.call('HMGET', KEYS[1], 'id', 'name', 'opinion', 'evidence_user_ids')
log[#log + 1] = {action = 'evolution', old_opinion = h[3] or '', new_opinion = ARGV[4], timestamp = ARGV[7], reason = ARGV[8]}
local fields = {'opinion', ARGV[4], 'embedding', ARGV[5], 'strength', ARGV[6],
  'last_reinforced', ARGV[7], 'evolution_history', cjson.encode(log)}
if ARGV[9] ~= '' then
  fields[#fields + 1] = 'stance'; fields[#fields + 1] = ARGV[9]
  fields[#fields + 1] = 'stance_at'; fields[#fields + 1] = ARGV[10]
end
local evidence = evidence_with(h[4], ARGV[11])
if evidence then
  fields[#fields + 1] = 'evidence_user_ids'; fields[#fields + 1] = evidence
end
redis.call('HSET', KEYS[1], unpack(fields))
record_effect(h[1])
return {1, h[1], h[2], ARGV[4], ARGV[6], tostring(#log)}
"#
    ))
});

/// ARGV[4] reason ("" = no history entry), ARGV[5] now. Returns nil when missing, else
/// `{applied, id, name}`.
pub static RETRACT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{GUARD}{}",
        r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return nil end
local h = redis.call('HMGET', KEYS[1], 'id', 'name', 'opinion', 'evolution_history')
if effect_used and redis.call('EXISTS', KEYS[2]) == 1 then return {0, h[1], h[2]} end
local fields = {'active', '0'}
if ARGV[4] ~= '' then
  local log = decode_list(h[4])
  log[#log + 1] = {action = 'retraction', old_opinion = h[3] or '', timestamp = ARGV[5], reason = ARGV[4]}
  fields[#fields + 1] = 'evolution_history'; fields[#fields + 1] = cjson.encode(log)
end
redis.call('HSET', KEYS[1], unpack(fields))
record_effect(h[1])
return {1, h[1], h[2]}
"#
    ))
});

/// Erasure of one user from one preference. ARGV[4] user id, ARGV[5] pseudonym, ARGV[6] now.
/// Replaces the user in related users, evidence users, the triggering user, the users of the
/// reinforcement log and the reasons of the evolution history; retracts the
/// preference when that user's conversations were its only evidence. Returns nil when missing,
/// else `{changed, retracted}` (1/0 each).
pub static PURGE_USER: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{GUARD}{}",
        r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return nil end
local user, pseudonym = ARGV[4], ARGV[5]
local h = redis.call('HMGET', KEYS[1], 'related_user_ids', 'evidence_user_ids', 'triggering_user_id', 'active', 'opinion', 'evolution_history', 'reinforcements')
local function replace(list)
  local out, changed = {}, false
  for _, value in ipairs(list) do
    local next_value = value
    if value == user then next_value = pseudonym; changed = true end
    local seen = false
    for _, kept in ipairs(out) do if kept == next_value then seen = true end end
    if not seen then out[#out + 1] = next_value end
  end
  return out, changed
end
local related, related_changed = replace(decode_list(h[1]))
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
if #evidence > 0 then
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
  history[#history + 1] = {action = 'retraction', old_opinion = h[5] or '', timestamp = ARGV[6], reason = 'erasure: its only evidence was an erased user'}
  fields[#fields + 1] = 'active'; fields[#fields + 1] = '0'
  history_changed = true
  retracted = 1
end
if history_changed then
  fields[#fields + 1] = 'evolution_history'; fields[#fields + 1] = encode_list(history)
end
redis.call('HSET', KEYS[1], unpack(fields))
return {1, retracted}
"#
    ))
});

/// Migration: sets a hash's embedding only if the hash still exists (HSET alone would create a
/// stub hash for a preference deleted meanwhile). `KEYS[1]` the hash, `ARGV[1]` the vector.
pub static SET_EMBEDDING: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'embedding', ARGV[1])
return 1
"#,
    )
});
