-- `KEYS[1]` is no preference's: only the persona's structures are touched.
for i = 6, #ARGV do settle_about_vectors(ARGV[i], true) end
return #ARGV - 5
