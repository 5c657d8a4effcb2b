-- ARGV: 2 before (created_at as 16 hex digits), 3 the delivery id every
-- pruned delivery's id sorts below, 4 the event id floor of before, 5 how
-- many records to look at, 6 cursor ('' to start, a delivery id, or an
-- event id). Raises the horizon, then removes finished deliveries created
-- before before and events below the floor that no delivery refers to.
-- Returns {deliveries removed, events removed, next cursor or ''}.
local beforeHex, dlvEnd, floor, budget, cursor = ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[6]
local h = redis.call('GET', P .. 'horizon')
if not h or h < floor then redis.call('SET', P .. 'horizon', floor) end
local deliveries, events = 0, 0

if string.sub(cursor, 1, 4) ~= 'evt_' then
  local lo = '-'
  if cursor ~= '' then lo = '(' .. cursor end
  local ids = redis.call('ZRANGEBYLEX', P .. 'log:dlv', lo, '(' .. dlvEnd, 'LIMIT', 0, budget)
  budget = budget - #ids
  for _, id in ipairs(ids) do
    local f = redis.call('HMGET', dkey(id), 'ep', 'member', 'state', 'token', 'replay', 'q')
    if not f[1] then
      redis.call('ZREM', P .. 'log:dlv', id)
    elseif not ACTIVE[f[3]] and f[4] == '' and f[5] ~= '1' and f[6] == '' and string.sub(f[2], 1, 16) < beforeHex then
      -- Nobody holds it and nothing queued it for a replay.
      local all = P .. 'dlvs:' .. f[1]
      redis.call('ZREM', all, f[2])
      redis.call('ZREM', all .. ':' .. f[3], f[2])
      redis.call('DEL', dkey(id), P .. 'att:' .. id)
      redis.call('ZREM', P .. 'log:dlv', id)
      deliveries = deliveries + 1
    end
  end
  if budget <= 0 then return {deliveries, 0, ids[#ids]} end
  cursor = ''
end

-- referred says whether a delivery of the event remains: a delivery's id
-- starts with its event's time, so only that millisecond's are read.
local function referred(id)
  local t = string.sub(id, 5, 14)
  for _, d in ipairs(redis.call('ZRANGEBYLEX', P .. 'log:dlv', '[dlv_' .. t, '(dlv_' .. t .. '~')) do
    if redis.call('HGET', dkey(d), 'evt') == id then return true end
  end
  return false
end

local lo = '-'
-- "\127" sorts after the space that ends the cursor's own member.
if cursor ~= '' then lo = '(' .. cursor .. '\127' end
local members = redis.call('ZRANGEBYLEX', P .. 'log:evt', lo, '(' .. floor, 'LIMIT', 0, budget)
local last = ''
local tenants = {}
for _, m in ipairs(members) do
  local id, tenant, kind = string.match(m, '^(%S+) (.+) (%S+)$')
  last = id or ''
  if not id then
    redis.call('ZREM', P .. 'log:evt', m)
  elseif not referred(id) then
    redis.call('DEL', P .. 'evt:' .. id)
    redis.call('ZREM', P .. 'evts:' .. tenant, id .. ' ' .. kind)
    redis.call('ZREM', P .. 'log:evt', m)
    events = events + 1
    tenants[tenant] = true
  end
end
-- A tenant's feed loses the positions at its head whose events are gone
-- (the oldest recorded, pruned first). An empty feed stays: it keeps the
-- last position given out, which the next event's must follow. The
-- previous version's feed of the tenant (feed:) goes.
for tenant in pairs(tenants) do
  local feed = P .. 'eventfeed:' .. tenant
  for _, e in ipairs(redis.call('XRANGE', feed, '-', '+', 'COUNT', budget)) do
    if redis.call('EXISTS', P .. 'evt:' .. e[2][2]) == 1 then break end
    redis.call('XDEL', feed, e[1])
  end
  redis.call('DEL', P .. 'feed:' .. tenant)
end
if #members < budget then last = '' end
return {deliveries, events, last}
