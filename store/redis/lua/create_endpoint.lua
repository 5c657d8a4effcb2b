-- ARGV: 2 id, 3 tenant key suffix, 4 record JSON. Returns 0 if it exists.
if not redis.call('SET', P .. 'ep:' .. ARGV[2], ARGV[4], 'NX') then return 0 end
redis.call('ZADD', P .. 'eps:' .. ARGV[3], 0, ARGV[2])
return 1
