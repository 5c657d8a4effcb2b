-- ARGV[2..]: delivery ids. Returns fetch(id) for each, false if gone.
local out = {}
for i = 2, #ARGV do out[#out + 1] = fetch(ARGV[i]) end
return out
