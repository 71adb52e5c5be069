if not load_record(KEYS[1], KEYS[4]) then
  return 0
end
sync(ARGV[6], {})
return 1
