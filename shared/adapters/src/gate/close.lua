-- Closes an event's waitlist once its cancellation window is over: no number can come back, so
-- nobody is promoted any more, and the waiting users' places and addresses leave Redis (DynamoDB
-- keeps the places; reconcile tells each user once). Running it again is harmless.
--
-- KEYS[1]  ev:{E}:meta     gets closed = 1 (wait.lua answers CLOSED)
-- KEYS[2]  ev:{E}:wait     deleted
-- KEYS[3]  ev:{E}:waiting  deleted (it holds the waiting users' addresses)
-- Returns the number of users who were still waiting in Redis.

local waiting = redis.call('ZCARD', KEYS[2])
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HSET', KEYS[1], 'closed', '1')
end
redis.call('DEL', KEYS[2], KEYS[3])
return waiting
