local out = {}
for i = 2, #KEYS do
  local r = load_record(KEYS[i], KEYS[1])
  local flat = {}
  if r then
    for name, value in pairs(r) do
      if name ~= 'embedding' then flat[#flat + 1] = name; flat[#flat + 1] = value end
    end
  end
  out[#out + 1] = flat
end
return out
