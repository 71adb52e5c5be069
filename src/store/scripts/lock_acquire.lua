-- KEYS[1] the lock, KEYS[2] the fencing counter; ARGV[1] the lock's lifetime in ms.
if redis.call('EXISTS', KEYS[1]) == 1 then return nil end
local now = redis.call('TIME')
local token = redis.call('INCR', KEYS[2]) .. '-' .. now[1] .. '.' .. now[2]
redis.call('SET', KEYS[1], token, 'PX', ARGV[1])
return token
