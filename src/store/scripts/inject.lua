local k = tonumber(ARGV[2])
-- No query vector (a short or empty query): no semantic pass; the user pass ranks by strength.
-- The persona's own layer (no vectors asked for, ARGV[5] "0") sends its searches beside this
-- script, in the same pipeline: the semantic VSIM, and one of each present user's own set;
-- their attribute strings need not pass through Lua and back. The script then says which
-- users' sets are whole (`whole`), so the caller knows which of those searches to trust. A
-- base layer's script searches itself: it reads its hits' vectors by id below.
local beside = ARGV[5] ~= '1'
local semantic = {}
if ARGV[1] ~= '' and not beside then
  -- ARGV[9], when not empty, is the EPSILON that leaves out the hits too far from the query
  -- to inject, as the persona's own search beside the script does: their attributes and
  -- vectors are then neither read nor sent.
  local search = {'VSIM', KEYS[1], 'FP32', ARGV[1], 'WITHSCORES', 'WITHATTRIBS', 'COUNT', k, 'EF', ARGV[6]}
  if ARGV[9] ~= '' then
    search[#search + 1] = 'EPSILON'
    search[#search + 1] = ARGV[9]
  end
  semantic = redis.call(unpack(search))
end
-- An element's vector as the service reads it (`query::stored_vector`): a Q8 set's as its
-- bytes (VEMB RAW: the stored direction times one scale, which a cosine and a VSIM query,
-- normalised, both ignore), not as 384 numbers in text; other quantisations' as the
-- dequantised numbers. nil when the element is gone.
local function stored_vector(id)
  local raw = redis.call('VEMB', KEYS[1], id, 'RAW')
  if not raw then return nil end
  local kind = raw[1]
  if type(kind) == 'table' then kind = kind.ok end
  if kind ~= 'int8' then return redis.call('VEMB', KEYS[1], id) end
  return raw[2]
end
local about, candidates = {}, {}
-- The user pass. With a query, each present user's own vector set (`Keys::about_vectors`) is
-- searched: one small VSIM, whatever the user's count (beside the script, or here for a base
-- layer, whose hits' vectors are read by id below). A user without a whole set (its count
-- is not that of the user's about-entries: a user with fewer than `USER_SET_MIN`, who has
-- none, or memory from before these sets until `index migrate`) has their candidates read,
-- which the service ranks.
local users, whole = {}, {}
if #ARGV >= 10 and ARGV[1] ~= '' and beside then
  for i = 10, #ARGV do
    local user = ARGV[i]
    local count = redis.call('VCARD', KEYS[3] .. ':' .. user)
    local entries = redis.call('ZLEXCOUNT', KEYS[3], '[' .. user .. '\0', '(' .. user .. '\1')
    if count == entries then
      whole[#whole + 1] = user
    else
      users[#users + 1] = user
    end
  end
elseif #ARGV >= 10 and ARGV[1] ~= '' then
  local nearest, order = {}, {}
  for i = 10, #ARGV do
    local user = ARGV[i]
    local set = KEYS[3] .. ':' .. user
    local count = redis.call('VCARD', set)
    local entries = redis.call('ZLEXCOUNT', KEYS[3], '[' .. user .. '\0', '(' .. user .. '\1')
    if count ~= entries then
      users[#users + 1] = user
    elseif count > 0 then
      local found = redis.call('VSIM', set, 'FP32', ARGV[1], 'WITHSCORES', 'COUNT', k, 'EF', ARGV[6])
      for j = 1, #found, 2 do
        local id, score = found[j], tonumber(found[j + 1])
        if not nearest[id] then order[#order + 1] = id end
        if not nearest[id] or score > nearest[id] then nearest[id] = score end
      end
    end
  end
  table.sort(order, function(a, b)
    if nearest[a] ~= nearest[b] then return nearest[a] > nearest[b] end
    return a < b
  end)
  for i = 1, math.min(k, #order) do
    local id = order[i]
    about[#about + 1] = id
    -- VSIM's score is (1 + cosine) / 2; the pass reports the cosine.
    about[#about + 1] = tostring(2 * nearest[id] - 1)
    about[#about + 1] = redis.call('VGETATTR', KEYS[1], id) or ''
  end
elseif #ARGV >= 10 then
  for i = 10, #ARGV do users[#users + 1] = ARGV[i] end
end
if #users > 0 then
  local cap = tonumber(ARGV[4])
  local seen, ids = {}, {}
  for _, user in ipairs(users) do
    local members = redis.call('ZRANGEBYLEX', KEYS[3], '[' .. user .. '\0', '(' .. user .. '\1', 'LIMIT', 0, cap)
    for _, member in ipairs(members) do
      local id = string.sub(member, #user + 2)
      if not seen[id] and #ids < cap then seen[id] = true; ids[#ids + 1] = id end
    end
  end
  if #ids > 0 and ARGV[1] == '' then
    -- Nothing to be near to: the strongest first (similarity 0, strength breaks the tie).
    local scored = {}
    for _, id in ipairs(ids) do
      local strength = tonumber(redis.call('ZSCORE', KEYS[2], id))
      if strength then scored[#scored + 1] = {id, 0, strength} end
    end
    table.sort(scored, function(a, b)
      if a[3] ~= b[3] then return a[3] > b[3] end
      return a[1] < b[1]
    end)
    for i = 1, math.min(k, #scored) do
      about[#about + 1] = scored[i][1]
      about[#about + 1] = '0'
      about[#about + 1] = redis.call('VGETATTR', KEYS[1], scored[i][1]) or ''
    end
  elseif #ids > 0 then
    -- Each candidate's vector and attributes, for the service to rank by similarity: a cosine
    -- over 384 numbers is a few microseconds in Rust and about 250 in this Lua (measured: 40
    -- candidates took an injection from 1 to 11 ms).
    for _, id in ipairs(ids) do
      local vector = stored_vector(id)
      if vector then
        candidates[#candidates + 1] = id
        candidates[#candidates + 1] = vector
        candidates[#candidates + 1] = redis.call('VGETATTR', KEYS[1], id) or ''
      end
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
-- The text of the JSON string field that `opening` (`"name":"`) starts, or nil.
local function time_field(attributes, opening)
  local at = string.find(attributes, opening, 1, true)
  if not at then return nil end
  local from = at + #opening
  local to = string.find(attributes, '"', from, true)
  if not to then return nil end
  return string.sub(attributes, from, to - 1)
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
      -- The times are read by a plain search, not by decoding the attributes (an element's
      -- are its whole record, several hundred bytes; a pattern tried at every byte cost about
      -- 8 µs an entry): an escaped quote inside another field cannot look like `"lr":"`.
      local voiced = time_field(attributes, '"lr":"')
      if not voiced or voiced == '' then voiced = time_field(attributes, '"sa":"') end
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
    local vector = stored_vector(id)
    if vector then
      vectors[#vectors + 1] = id
      vectors[#vectors + 1] = vector
    end
  end
  for i = 1, #semantic do
    -- RESP2 flat triples; a RESP3 map arrives as a flat list too in Lua.
    if i % 3 == 1 then add(semantic[i]) end
  end
  for i = 1, #about, 3 do add(about[i]) end
  for i = 1, #strongest, 2 do add(strongest[i]) end
end
return {semantic, about, strongest, redis.call('GET', KEYS[4]) or '', vectors, candidates, whole}
