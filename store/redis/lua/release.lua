-- ARGV: 2 not before (ns, '' for none), 3 not before (us), 4.. id/token
-- pairs.
local nbNs, nbUs = ARGV[2], ARGV[3]
local touched = {}
for i = 4, #ARGV, 2 do
  local id, token = ARGV[i], ARGV[i + 1]
  local f = redis.call('HMGET', dkey(id), 'token', 'ep', 'state', 'replay', 'nextus')
  if f[1] and f[1] ~= '' and f[1] == token then
    redis.call('ZREM', P .. 'leases', id)
    redis.call('HSET', dkey(id), 'token', '', 'until', '')
    if ACTIVE[f[3]] or f[4] == '1' then
      local at = f[5] ~= '' and f[5] or '0'
      if nbNs ~= '' and tonumber(nbUs) > tonumber(at) then
        at = nbUs
        redis.call('HSET', dkey(id), 'next', nbNs, 'nextus', nbUs)
      end
      if push(id, f[2], at) then touched[f[2]] = true end
    end
  end
end
for ep in pairs(touched) do refile(ep) end
return 0
