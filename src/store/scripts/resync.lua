if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
sync(ARGV[6], {})
return 1
