-- ARGV: 2 id, 3 token, 4 attempt JSON ('' for none), 5 state, 6 updated
-- (ns), 7 next (ns, '' once final), 8 next (us). Appends the attempt and
-- moves the delivery to its new state in one step.
local id, token, attempt, state = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local f = redis.call('HMGET', dkey(id), 'token', 'ep', 'state', 'member')
if not f[2] then return {'notfound'} end
if f[1] == '' or f[1] ~= token then return {'leaselost'} end
local ep = f[2]
redis.call('ZREM', P .. 'leases', id)
if attempt ~= '' then redis.call('RPUSH', P .. 'att:' .. id, attempt) end
setState(id, ep, f[4], f[3], state)
redis.call('HSET', dkey(id), 'updated', ARGV[6], 'next', ARGV[7], 'nextus', ARGV[8],
  'token', '', 'until', '', 'replay', '')
if ACTIVE[state] then push(id, ep, ARGV[8]) else pull(id, ep) end
refile(ep)
return {'ok', fetch(id)}
