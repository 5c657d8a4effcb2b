-- ARGV: 2 endpoint, 3 lex min (exclusive or inclusive, as ZRANGEBYLEX
-- takes it), 4 now (ns), 5 now (us), 6 limit. Queues one replay for each
-- failed delivery from min on. Returns {queued, last member seen or ''}.
local ep, min, nowNs, nowUs, limit = ARGV[2], ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6])
local members = redis.call('ZRANGEBYLEX', P .. 'dlvs:' .. ep .. ':failed', min, '+', 'LIMIT', 0, limit)
local n = 0
for _, member in ipairs(members) do
  local id = string.sub(member, 17)
  local f = redis.call('HMGET', dkey(id), 'replay', 'token', 'until')
  local leased = f[2] and f[2] ~= '' and f[3] ~= '' and tonumber(f[3]) > tonumber(nowUs)
  if f[2] and f[1] ~= '1' and not leased then
    if f[2] ~= '' then redis.call('ZREM', P .. 'leases', id) end
    redis.call('HSET', dkey(id), 'replay', '1', 'next', nowNs, 'nextus', nowUs, 'token', '', 'until', '')
    if push(id, ep, nowUs) then n = n + 1 end
  end
end
refile(ep)
local last = ''
if #members == limit then last = members[#members] end
return {n, last}
