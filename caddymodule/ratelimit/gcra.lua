-- GCRA for one credential plus its hourly usage, in one round trip.
-- The same arithmetic as cell.step in gcra.go; keep them in step.
--
-- KEYS[1]  pgw:rl:{id}     the credential's TAT, microseconds since the epoch
-- KEYS[2]  pgw:usage:{id}  hash: "<unix hour>:a" admitted, "<unix hour>:r"
--                          refused, "trimmed" the hour old fields were last
--                          dropped
-- ARGV[1]  interval T, microseconds
-- ARGV[2]  tolerance B*T, microseconds
-- ARGV[3]  "allow" books a request and counts it; "peek" only looks
-- ARGV[4]  now in microseconds, or 0 for Redis's own clock (tests pin it)
-- ARGV[5]  hours of usage to keep
--
-- Returns {allowed 0|1, remaining, reset us, retry_after us}.

local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local now = tonumber(ARGV[4])
if now == 0 then
  -- One clock for every gateway instance: theirs may disagree.
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end

if ARGV[3] == 'peek' then
  local remaining = math.floor(math.max(tolerance - (tat - now), 0) / interval)
  local retry = 0
  if remaining < 1 then retry = tat + interval - tolerance - now end
  return {remaining > 0 and 1 or 0, remaining, tat - now, retry}
end

local allowed, remaining, reset, retry
local nexttat = tat + interval
local allow_at = nexttat - tolerance
if now < allow_at then
  -- A refusal leaves the TAT alone: refused requests cost nothing.
  allowed, remaining, reset, retry = 0, 0, tat - now, allow_at - now
else
  allowed, remaining, reset, retry = 1, math.floor((tolerance - (nexttat - now)) / interval), nexttat - now, 0
  -- The key lives exactly as long as the bucket is not full; an expired
  -- key and a full bucket mean the same. Numbers go to redis.call as they
  -- are: Redis writes them with %.17g, exact for integers below 2^53, and
  -- cheaper than string.format here, which runs on every request.
  redis.call('SET', KEYS[1], nexttat, 'PX', math.ceil((nexttat - now) / 1000))
end

local hour = math.floor(now / 3600000000)
-- Lua's own number-to-string (%.14g) is exact for an hour number.
local n = redis.call('HINCRBY', KEYS[2], hour .. (allowed == 1 and ':a' or ':r'), 1)

-- Once an hour per credential: drop fields past retention and push the
-- key's expiry out, so an active credential's hash stays small and an idle
-- one's disappears. Only the request that starts an hour's count (n == 1)
-- looks at the marker, which spares every other request a call; a count
-- that AddUsage started instead defers the trim to the next such request,
-- at most an hour later.
if n == 1 and tonumber(redis.call('HGET', KEYS[2], 'trimmed')) ~= hour then
  local keep = tonumber(ARGV[5])
  local oldest = hour - keep
  for _, field in ipairs(redis.call('HKEYS', KEYS[2])) do
    local h = tonumber(string.match(field, '^(%d+):'))
    if h and h < oldest then redis.call('HDEL', KEYS[2], field) end
  end
  redis.call('HSET', KEYS[2], 'trimmed', hour)
  redis.call('PEXPIRE', KEYS[2], keep * 3600000)
end

return {allowed, remaining, reset, retry}
