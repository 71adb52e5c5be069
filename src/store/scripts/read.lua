-- KEYS[1] the persona's vector set, KEYS[2..] preference keys, ARGV[i - 1] the id of KEYS[i].
-- A hash is the record wherever one exists (record.lua); otherwise the element's attributes
-- are handed over raw, one value alone, and the service decodes them (element_record.rs):
-- decoding here cost Redis's one thread about a third of ingest's time in scripts.
local out = {}
for i = 2, #KEYS do
  local flat = redis.call('HGETALL', KEYS[i])
  if #flat > 0 then
    local fields = {}
    for j = 1, #flat, 2 do
      if flat[j] ~= 'embedding' then
        fields[#fields + 1] = flat[j]; fields[#fields + 1] = flat[j + 1]
      end
    end
    out[#out + 1] = fields
  else
    local raw = redis.call('VGETATTR', KEYS[1], ARGV[i - 1])
    if raw then out[#out + 1] = {raw} else out[#out + 1] = {} end
  end
end
return out
