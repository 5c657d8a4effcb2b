-- GCRA and hourly usage for a batch of requests, in one round trip.
-- Each request is decided as if alone, in the order given; the batch only
-- shares the call's fixed costs. The arithmetic is cell.step in gcra.go;
-- keep them in step.
--
-- KEYS     two per credential in the batch, in pairs:
--          pgw:rl:{id}     the credential's TAT, microseconds since the epoch
--          pgw:usage:{id}  hash: "<unix hour>:a" admitted, "<unix hour>:r"
--                          refused, "trimmed" the hour old fields were last
--                          dropped
-- ARGV[1]  hours of usage to keep
-- ARGV[2..] five per request:
--          k          the request's credential: KEYS[2k-1] and KEYS[2k]
--          interval   T, microseconds
--          tolerance  B*T, microseconds
--          consume    1 books the request and counts it; 0 only looks
--          now        microseconds since the epoch, or 0 for Redis's own
--                     clock (tests pin it)
--
-- Returns four integers per request, in order: allowed 0|1, remaining,
-- reset us, retry_after us.

local keep = tonumber(ARGV[1])

local clock
local function redis_now()
  if not clock then
    -- One clock for every gateway instance: theirs may disagree.
    local t = redis.call('TIME')
    clock = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return clock
end

-- Per credential: its TAT as the batch has left it, whether a request
-- booked it (so it must be written back), and the now it was booked at;
-- and per usage field, how many requests the batch counted.
local tats, booked, booked_at, counts = {}, {}, {}, {}

local out, o = {}, 0
for a = 2, #ARGV, 5 do
  local k = tonumber(ARGV[a])
  local interval = tonumber(ARGV[a + 1])
  local tolerance = tonumber(ARGV[a + 2])
  local consume = ARGV[a + 3] == '1'
  local now = tonumber(ARGV[a + 4])
  if now == 0 then now = redis_now() end

  -- As stored, not yet raised to this request's now: a test's pinned
  -- clock may run backwards from one request to the next.
  local stored = tats[k]
  if stored == nil then
    stored = tonumber(redis.call('GET', KEYS[2 * k - 1])) or 0
    tats[k] = stored
  end
  local tat = math.max(stored, now)

  local allowed, remaining, reset, retry
  if not consume then
    remaining = math.floor(math.max(tolerance - (tat - now), 0) / interval)
    allowed, reset, retry = remaining > 0 and 1 or 0, tat - now, 0
    if remaining < 1 then retry = tat + interval - tolerance - now end
  else
    local nexttat = tat + interval
    local allow_at = nexttat - tolerance
    if now < allow_at then
      -- A refusal leaves the TAT alone: refused requests cost nothing.
      allowed, remaining, reset, retry = 0, 0, tat - now, allow_at - now
    else
      allowed, remaining, reset, retry = 1, math.floor((tolerance - (nexttat - now)) / interval), nexttat - now, 0
      tats[k], booked[k], booked_at[k] = nexttat, true, now
    end
    -- Lua's own number-to-string (%.14g) is exact for an hour number.
    local field = math.floor(now / 3600000000) .. (allowed == 1 and ':a' or ':r')
    local c = counts[k]
    if c == nil then c = {}; counts[k] = c end
    c[field] = (c[field] or 0) + 1
  end
  out[o + 1], out[o + 2], out[o + 3], out[o + 4] = allowed, remaining, reset, retry
  o = o + 4
end

for k in pairs(booked) do
  -- The key lives exactly as long as the bucket is not full; an expired
  -- key and a full bucket mean the same. Numbers go to redis.call as they
  -- are: Redis writes them with %.17g, exact for integers below 2^53.
  local tat, now = tats[k], booked_at[k]
  redis.call('SET', KEYS[2 * k - 1], tat, 'PX', math.ceil((tat - now) / 1000))
end

for k, c in pairs(counts) do
  local key = KEYS[2 * k]
  for field, n in pairs(c) do
    -- Once an hour per credential: drop fields past retention and push
    -- the key's expiry out, so an active credential's hash stays small
    -- and an idle one's disappears. Only the batch that starts an hour's
    -- count looks at the marker, which spares every other batch a call; a
    -- count that AddUsage started instead defers the trim to the next
    -- such batch, at most an hour later.
    if redis.call('HINCRBY', key, field, n) == n then
      local hour = tonumber(string.match(field, '^(%d+):'))
      if tonumber(redis.call('HGET', key, 'trimmed')) ~= hour then
        local oldest = hour - keep
        for _, f in ipairs(redis.call('HKEYS', key)) do
          local h = tonumber(string.match(f, '^(%d+):'))
          if h and h < oldest then redis.call('HDEL', key, f) end
        end
        redis.call('HSET', key, 'trimmed', hour)
        redis.call('PEXPIRE', key, keep * 3600000)
      end
    end
  end
end

return out
