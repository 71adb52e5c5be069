-- KEYS[1] the lock; ARGV[1] the caller's token, ARGV[2] the new lifetime in ms.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end
