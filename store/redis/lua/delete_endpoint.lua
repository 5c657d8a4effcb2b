-- ARGV: 2 endpoint, 3 its tenant's index key suffix, 4 limit, 5 '1' on
-- the first call. The first call removes the endpoint and its queue, so nothing of it is claimed or
-- queued again; it and later calls each delete up to limit of its
-- deliveries. Returns how many remain, or -1 if the endpoint was not there
-- on the first call.
local ep, tenant, limit, first = ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
if first == '1' then
  if redis.call('DEL', P .. 'ep:' .. ep) == 0 then return -1 end
  redis.call('ZREM', P .. 'eps:' .. tenant, ep)
  local queued = redis.call('ZCARD', P .. 'q:' .. ep)
  if queued > 0 then redis.call('DECRBY', P .. 'backlog', queued) end
  redis.call('DEL', P .. 'q:' .. ep)
  redis.call('ZREM', P .. 'heads', ep)
  redis.call('HDEL', P .. 'snooze', ep)
end
local all = P .. 'dlvs:' .. ep
for _, member in ipairs(redis.call('ZRANGE', all, 0, limit - 1)) do
  local id = string.sub(member, 17)
  redis.call('ZREM', P .. 'leases', id)
  redis.call('DEL', dkey(id), P .. 'att:' .. id)
  redis.call('ZREM', P .. 'log:dlv', id)
  redis.call('ZREM', all, member)
end
local left = redis.call('ZCARD', all)
if left == 0 then
  redis.call('DEL', all, all .. ':pending', all .. ':retrying', all .. ':delivered', all .. ':failed')
end
return left
