local existing = applied_before()
if existing then return {0, existing} end
local id = ARGV[10]
-- The service's encoding of the new record (ARGV[7], its view ARGV[8]), placed as it is where
-- no record of this id is there (apply.lua says why); anything else is written as before.
if ARGV[7] ~= '' and not KEEP_HASH and redis.call('EXISTS', KEYS[1]) == 0
  and redis.call('VISMEMBER', KEYS[4], id) == 0 then
  local r, vector = argv_record(9)
  if vector and #vector == VECTOR_BYTES then
    written_vectors[KEYS[1]] = vector
    record_effect(id)
    if ARGV[6] ~= '' then record_effect_as(ARGV[6], id) end
    sync(id, {}, nil, {record = r, whole = ARGV[7], view = ARGV[8]})
    return {1, id}
  end
end
local fields = {}
for i = 9, #ARGV do fields[#fields + 1] = ARGV[i] end
write_record(fields)
record_effect(id)
if ARGV[6] ~= '' then record_effect_as(ARGV[6], id) end
sync(id, {}, nil)
return {1, id}
