-- ARGV: 2 now (us), 3 lease until (us), 4 max, 5 per endpoint, 6 token
-- prefix, 7 per firm (-1: no bound), 8 the number F of firm/room pairs,
-- 9..8+2F those pairs, then endpoint/room pairs. Returns {next, claims},
-- each claim {token, fetch(id), its event's record or false}; next is ''
-- for none.
local now, untilUs = ARGV[2], ARGV[3]
local nowN = tonumber(now)
local max, per, tokenPrefix = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local perFirm, nFirms = tonumber(ARGV[7]), tonumber(ARGV[8])
local firmRoom = {}
for i = 9, 8 + 2 * nFirms, 2 do firmRoom[ARGV[i]] = tonumber(ARGV[i + 1]) end
local room = {}
for i = 9 + 2 * nFirms, #ARGV, 2 do room[ARGV[i]] = tonumber(ARGV[i + 1]) end

-- firmLeft is how many more of a firm's deliveries this claim may take;
-- an endpoint is one firm's, so its first due delivery says whose.
local function firmLeft(firm)
  local r = firmRoom[firm]
  if r == nil then
    if perFirm < 0 then return max end
    r = perFirm
    firmRoom[firm] = r
  end
  return r
end
local touched = {}

-- Deliveries whose lease ran out (their dispatcher died holding them) are
-- due again first.
for _, id in ipairs(redis.call('ZRANGEBYSCORE', P .. 'leases', '-inf', now, 'LIMIT', 0, 1000)) do
  redis.call('ZREM', P .. 'leases', id)
  local f = redis.call('HMGET', dkey(id), 'ep', 'state', 'replay', 'nextus')
  if f[1] then
    redis.call('HSET', dkey(id), 'token', '', 'until', '')
    if ACTIVE[f[2]] or f[3] == '1' then
      if push(id, f[1], f[4] ~= '' and f[4] or '0') then touched[f[1]] = true end
    end
  end
end
for ep in pairs(touched) do refile(ep) end

local claims = {}
local n = 0
local offset = 0
while n < max do
  local heads = redis.call('ZRANGEBYSCORE', P .. 'heads', '-inf', now, 'LIMIT', offset, 256)
  if #heads == 0 then break end
  offset = offset + #heads
  for _, ep in ipairs(heads) do
    local r = room[ep] or per
    local firm = nil
    if r > 0 and n < max then
      local first = redis.call('ZRANGEBYSCORE', P .. 'q:' .. ep, '-inf', now, 'LIMIT', 0, 1)
      if #first > 0 then
        firm = redis.call('HGET', dkey(first[1]), 'firm') or ''
        r = math.min(r, firmLeft(firm))
      end
    end
    if r > 0 and n < max then
      local ids = redis.call('ZRANGEBYSCORE', P .. 'q:' .. ep, '-inf', now, 'LIMIT', 0, math.min(r, max - n))
      if firmRoom[firm] ~= nil then firmRoom[firm] = firmRoom[firm] - #ids end
      for _, id in ipairs(ids) do
        pull(id, ep)
        n = n + 1
        local token = tokenPrefix .. n
        redis.call('HSET', dkey(id), 'token', token, 'until', untilUs)
        redis.call('ZADD', P .. 'leases', untilUs, id)
        local evt = redis.call('HGET', dkey(id), 'evt')
        local event = evt and redis.call('GET', P .. 'evt:' .. evt)
        claims[#claims + 1] = {token, fetch(id), event or false}
      end
      touched[ep] = true
    end
    if n >= max then break end
  end
end
for ep in pairs(touched) do refile(ep) end

local nxt = ''
if n >= max then
  nxt = now
else
  for _, key in ipairs({P .. 'heads', P .. 'leases'}) do
    local first = redis.call('ZRANGEBYSCORE', key, '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    if #first > 0 and (nxt == '' or tonumber(first[2]) < tonumber(nxt)) then
      nxt = first[2]
    end
  end
end
return {nxt, claims}
