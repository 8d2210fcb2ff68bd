-- The seeds' flash-sale script (hm-dianping, seeds/002), the baseline of the gate benchmark:
-- four commands, no rate limit, no window, no ticket numbers, no outbox.
--
-- KEYS[1]  stock counter (string)
-- KEYS[2]  buyers (set)
-- ARGV[1]  user id
-- Returns: 1 granted, 0 sold out, 2 already bought
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then
  return 2
end
if tonumber(redis.call('GET', KEYS[1])) <= 0 then
  return 0
end
redis.call('DECR', KEYS[1])
redis.call('SADD', KEYS[2], ARGV[1])
return 1
