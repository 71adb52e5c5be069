-- KEYS[1] the lock; ARGV[1] the caller's token: only its own lock is released.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end
