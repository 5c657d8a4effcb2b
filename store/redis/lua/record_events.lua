-- ARGV[2..]: per event id, tenant key suffix, kind, record JSON. Returns 1
-- or 0 per event: stored now, or stored already (or beyond the retention
-- horizon, which is as good as stored: it was, and was pruned).
local horizon = redis.call('GET', P .. 'horizon') or ''
local out = {}
for i = 2, #ARGV, 4 do
  local id = ARGV[i]
  if id >= horizon and redis.call('SET', P .. 'evt:' .. id, ARGV[i + 3], 'NX') then
    redis.call('ZADD', P .. 'evts:' .. ARGV[i + 1], 0, id .. ' ' .. ARGV[i + 2])
    redis.call('ZADD', P .. 'log:evt', 0, id .. ' ' .. ARGV[i + 1] .. ' ' .. ARGV[i + 2])
    -- The feed's position, assigned here so that record order is script
    -- order: 0-<n>, n counting the tenant's own events from 1 with no
    -- gap, so that a reader can tell what was trimmed; ~ trims whole
    -- nodes, keeping at least FeedLength (10000). The previous version's
    -- stream of the tenant, with positions numbered by time, goes with
    -- the first event of this one.
    local pos = redis.call('XADD', P .. 'eventfeed:' .. ARGV[i + 1], 'MAXLEN', '~', 10000, '0-*', 'id', id)
    if pos == '0-1' then
      redis.call('DEL', P .. 'feed:' .. ARGV[i + 1])
    end
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
