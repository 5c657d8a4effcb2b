-- GCRA (internal/gcra) and hourly usage for a batch of requests, in one
-- round trip: the one Lua GCRA, run by the rate limiter for batches of
-- requests and by the vendor budgets for one request at a time. The
-- caller sends a batch as groups: the requests of one key that share a
-- rate, a mode and a clock. Groups are decided in the order given, and a
-- group's requests one after another, each as if alone; the batch only
-- shares the call's fixed costs. A group's requests arrive at one
-- instant, so those admitted are the first ones: the script counts them,
-- and the caller replays gcra.Cell.Step from the TAT the group found to
-- give each request its own answer (RateBatch.decode). Keep the two in
-- step: TestBatchMatchesGCRA and TestBudgetScriptMatchesGCRA compare them.
--
-- KEYS     two per key in the batch, in pairs:
--          the key's TAT, microseconds since the epoch (pgw:rl:{id} for a
--          credential)
--          its usage hash (pgw:usage:{id}): "<unix hour>:a" admitted,
--          "<unix hour>:r" refused, "trimmed" the hour old fields were
--          last dropped; untouched in mode 2
-- ARGV[1]  hours of usage to keep
-- ARGV[2..] six per group:
--          k          the group's key: KEYS[2k-1] and KEYS[2k]
--          interval   T, microseconds
--          tolerance  B*T, microseconds
--          mode       0 only looks; 1 books the requests and counts them;
--                     2 books them without counting (vendor budgets)
--          now        microseconds since the epoch, or 0 for Redis's own
--                     clock (tests pin it)
--          n          how many requests
--
-- Returns two integers per group, in order: the TAT the group found,
-- raised to now, less now (microseconds); and how many of its requests
-- were admitted.

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

local function count(k, field, n)
  if n == 0 then return end
  local c = counts[k]
  if c == nil then c = {}; counts[k] = c end
  c[field] = (c[field] or 0) + n
end

local out, o = {}, 0
for a = 2, #ARGV, 6 do
  local k = tonumber(ARGV[a])
  local interval = tonumber(ARGV[a + 1])
  local tolerance = tonumber(ARGV[a + 2])
  local mode = ARGV[a + 3]
  local consume, counted = mode ~= '0', mode == '1'
  local now = tonumber(ARGV[a + 4])
  if now == 0 then now = redis_now() end
  local n = tonumber(ARGV[a + 5])

  -- As stored, not yet raised to this group's now: a test's pinned clock
  -- may run backwards from one group to the next.
  local stored = tats[k]
  if stored == nil then
    stored = tonumber(redis.call('GET', KEYS[2 * k - 1])) or 0
    tats[k] = stored
  end
  local tat = math.max(stored, now)
  local base, admitted = tat - now, 0

  if consume then
    -- One more interval booked must keep the TAT within the tolerance of
    -- now. A refusal leaves the TAT alone: refused requests cost nothing,
    -- and every later request of the group is refused too.
    while admitted < n and now >= tat + interval - tolerance do
      tat, admitted = tat + interval, admitted + 1
    end
    if admitted > 0 then
      tats[k], booked[k], booked_at[k] = tat, true, now
    end
    if counted then
      -- Lua's own number-to-string (%.14g) is exact for an hour number.
      local hour = math.floor(now / 3600000000)
      count(k, hour .. ':a', admitted)
      count(k, hour .. ':r', n - admitted)
    end
  end
  out[o + 1], out[o + 2] = base, admitted
  o = o + 2
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
