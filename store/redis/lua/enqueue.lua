-- ARGV[2..]: per delivery id, endpoint, member, static JSON, firm, state,
-- next (ns), next (us), updated (ns), event id. Returns how many were new;
-- deliveries of events beyond the retention horizon are skipped.
local horizon = redis.call('GET', P .. 'horizon') or ''
local created = 0
local touched = {}
for i = 2, #ARGV, 10 do
  local id, ep, member = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if ARGV[i + 9] >= horizon and redis.call('EXISTS', dkey(id)) == 0 and redis.call('EXISTS', P .. 'ep:' .. ep) == 1 then
    local state = ARGV[i + 5]
    redis.call('HSET', dkey(id), 'd', ARGV[i + 3], 'firm', ARGV[i + 4], 'ep', ep, 'member', member,
      'state', state, 'next', ARGV[i + 6], 'nextus', ARGV[i + 7], 'updated', ARGV[i + 8],
      'token', '', 'until', '', 'replay', '', 'q', '', 'evt', ARGV[i + 9])
    redis.call('ZADD', P .. 'dlvs:' .. ep, 0, member)
    redis.call('ZADD', P .. 'log:dlv', 0, id)
    redis.call('ZADD', P .. 'dlvs:' .. ep .. ':' .. state, 0, member)
    if ACTIVE[state] then
      push(id, ep, ARGV[i + 7])
      touched[ep] = true
    end
    created = created + 1
  end
end
for ep in pairs(touched) do refile(ep) end
return created
