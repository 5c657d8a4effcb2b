-- ARGV: 2 id, 3 now (us), 4 until (us), 5 token. Leases one delivery for a
-- replay whatever its state.
local id, now, untilUs, token = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local f = redis.call('HMGET', dkey(id), 'token', 'until', 'ep')
if not f[3] then return {'notfound'} end
if f[1] ~= '' then
  if f[2] ~= '' and tonumber(f[2]) > tonumber(now) then return {'busy'} end
  redis.call('ZREM', P .. 'leases', id)
end
pull(id, f[3])
redis.call('HSET', dkey(id), 'token', token, 'until', untilUs)
redis.call('ZADD', P .. 'leases', untilUs, id)
refile(f[3])
return {'ok', fetch(id)}
