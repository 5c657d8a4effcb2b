-- ARGV: 2 endpoint, 3 until (us, '' lifts the snooze).
local ep, untilUs = ARGV[2], ARGV[3]
if redis.call('EXISTS', P .. 'ep:' .. ep) == 0 then return 0 end
if untilUs == '' then
  redis.call('HDEL', P .. 'snooze', ep)
else
  redis.call('HSET', P .. 'snooze', ep, untilUs)
end
refile(ep)
return 1
