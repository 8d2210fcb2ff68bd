-- The exact rebuild's first step at a bucket's sent record (docs/DESIGN.md section 10), after the
-- bucket itself stopped (stop.lua): the record takes no order any more (keep_sent.lua answers
-- MOVED_ON), and remembers which rebuild stopped it last, the only one that lays it down again.
--
-- KEYS[1]  the bucket's sent record (keys::sent)
-- ARGV[1]  the rebuild's token
-- ARGV[2]  how long a record created here lives (ms): longer than any rebuild
-- Returns LAID:<replicas>:<server> when the record is laid down (it holds every order of its bucket
-- that may be on the queue or was stored since it stopped), LOST:<replicas>:<server> when it was
-- lost (server.lua).

if #ARGV ~= 2 then
  return redis.error_reply('ERR stop_sent: expected token, ms')
end
redis.call('HDEL', KEYS[1], '@open')
redis.call('HSET', KEYS[1], '@stop', ARGV[1])
if redis.call('PTTL', KEYS[1]) == -1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if redis.call('HEXISTS', KEYS[1], '@laid') == 1 then
  return 'LAID:' .. server()
end
return 'LOST:' .. server()
