-- One page of the registry of personas, in (score, persona id) order after a cursor.
-- KEYS[1] the registry; ARGV[1] the cursor's score, ARGV[2] its persona id ('' to start),
-- ARGV[3] how many. Returns persona id, score, ... (flat), at most ARGV[3] of them.
--
-- Why this order walks safely: a persona's score is its last write and only grows (ZADD GT),
-- and its id never changes, so a persona present for the whole walk sorts after the cursor
-- until a page returns it. One written during the walk can come twice, never not at all.
-- Redis orders members of one score by their bytes, so the first member after the cursor is
-- found by a binary search over the ranks of the cursor's score (each probe O(log N)): the
-- cursor's own persona may have been written or deleted since, and ties can be many (a
-- migration registers personas at score 0).
local key, count = KEYS[1], tonumber(ARGV[3])
if ARGV[2] == '' then
  return redis.call('ZRANGE', key, 0, count - 1, 'WITHSCORES')
end
local cursor_score, cursor_id = ARGV[1], ARGV[2]

-- Bytewise, as Redis orders them (Lua's own < follows the server's locale).
local function sorts_after(a, b)
  local shorter = math.min(#a, #b)
  for i = 1, shorter do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x > y
    end
  end
  return #a > #b
end

local low = redis.call('ZCOUNT', key, '-inf', '(' .. cursor_score)
local high = low + redis.call('ZCOUNT', key, cursor_score, cursor_score)
while low < high do
  local middle = math.floor((low + high) / 2)
  local at = redis.call('ZRANGE', key, middle, middle)[1]
  if sorts_after(at, cursor_id) then
    high = middle
  else
    low = middle + 1
  end
end
return redis.call('ZRANGE', key, low, low + count - 1, 'WITHSCORES')
