-- Shared by every script: KEYS[1] routes the call (every key shares one
-- hash tag), ARGV[1] is the key prefix. Times are strings of Unix
-- microseconds: Lua numbers are doubles, exact to 2^53, but a number
-- handed back to Redis is printed with 14 digits, so scores are only ever
-- compared as numbers and always written as the strings they came in as.
local P = ARGV[1]
local ACTIVE = {pending = true, retrying = true}

local function dkey(id) return P .. 'dlv:' .. id end

-- refile files an endpoint's head again: the score of its earliest queued
-- delivery, or the end of its snooze if later; no head when nothing is
-- queued.
local function refile(ep)
  local first = redis.call('ZRANGE', P .. 'q:' .. ep, 0, 0, 'WITHSCORES')
  if #first == 0 then
    redis.call('ZREM', P .. 'heads', ep)
    return
  end
  local head = first[2]
  local snooze = redis.call('HGET', P .. 'snooze', ep)
  if snooze and tonumber(snooze) > tonumber(head) then
    head = snooze
  end
  redis.call('ZADD', P .. 'heads', head, ep)
end

-- push queues a delivery at score at (a string), unless its endpoint is
-- gone; pull takes it out. Both keep the backlog count.
local function push(id, ep, at)
  if redis.call('EXISTS', P .. 'ep:' .. ep) == 0 then
    return false
  end
  if redis.call('ZADD', P .. 'q:' .. ep, at, id) == 1 then
    redis.call('INCR', P .. 'backlog')
  end
  redis.call('HSET', dkey(id), 'q', at)
  return true
end

local function pull(id, ep)
  if redis.call('ZREM', P .. 'q:' .. ep, id) == 1 then
    redis.call('DECR', P .. 'backlog')
  end
  redis.call('HSET', dkey(id), 'q', '')
end

local FIELDS = {'d', 'firm', 'ep', 'member', 'state', 'next', 'nextus', 'updated', 'token', 'until', 'replay', 'q'}

-- fetch returns a delivery as the Go side decodes it: its fields in FIELDS
-- order, its endpoint's snooze and its attempts; false if it is gone.
local function fetch(id)
  local f = redis.call('HMGET', dkey(id), unpack(FIELDS))
  if not f[1] then
    return false
  end
  local snooze = redis.call('HGET', P .. 'snooze', f[3]) or ''
  return {f, snooze, redis.call('LRANGE', P .. 'att:' .. id, 0, -1)}
end

-- setState moves a delivery between its endpoint's per-state indexes.
local function setState(id, ep, member, from, to)
  if from ~= to then
    redis.call('ZREM', P .. 'dlvs:' .. ep .. ':' .. from, member)
    redis.call('ZADD', P .. 'dlvs:' .. ep .. ':' .. to, 0, member)
  end
  redis.call('HSET', dkey(id), 'state', to)
end
