if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local fields = {'embedding', ARGV[6]}
with_next_rev(fields)
redis.call('HSET', KEYS[1], unpack(fields))
sync(ARGV[7], {}, true)
return 1
