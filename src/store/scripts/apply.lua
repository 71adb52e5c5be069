-- The service encoded the record as this write leaves it (ARGV[7], injection's view ARGV[8])
-- from the record it read at revision ARGV[6]. Where that record is the one here (it lives in
-- its element, no hash beside it, at that revision), the encoding is placed as it is, and
-- Redis neither decodes nor encodes a record (issue 32: that was most of ingest's time in
-- scripts). Anywhere else the script reads and encodes the record itself.
if ARGV[7] ~= '' and not KEEP_HASH and redis.call('EXISTS', KEYS[1]) == 0 then
  local id = ARGV[11]
  local raw = redis.call('VGETATTR', KEYS[4], id)
  if raw then
    local done = applied_to(id)
    if type(done) == 'table' then return done end
    if done then return {0, id} end
    -- The encoder writes the revision as text, under one key no other field takes.
    if (string.match(raw, '"rv":"([^"]*)"') or '') ~= ARGV[6] then
      return redis.error_reply('CONFLICT ' .. id)
    end
    local r, vector = argv_record(10)
    if not vector or #vector == VECTOR_BYTES then
      written_vectors[KEYS[1]] = vector
      sync(id, decode_list(ARGV[9]), nil, {record = r, whole = ARGV[7], view = ARGV[8]})
      record_effect(id)
      return {1, id}
    end
  end
end
if not load_record(KEYS[1], KEYS[4]) then return nil end
local h = record_fields(KEYS[1], KEYS[4], 'id', 'rev', 'related_user_ids')
local done = applied_to(h[1])
if type(done) == 'table' then return done end
if done then return {0, h[1]} end
if (h[2] or '') ~= ARGV[6] then
  return redis.error_reply('CONFLICT ' .. h[1])
end
local fields = {}
for i = 10, #ARGV do fields[#fields + 1] = ARGV[i] end
with_next_rev(fields)
write_record(fields)
record_effect(h[1])
sync(h[1], decode_list(h[3]))
return {1, h[1]}
