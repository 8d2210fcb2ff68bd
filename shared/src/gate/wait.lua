-- Puts a sold-out user on the event's waitlist, once, in arrival order, within its size.
--
-- KEYS[1]  ev:{E}:meta     start, cancel_until (ms), wait_max; the user's field (grab.lua)
-- KEYS[2]  ev:{E}:seats    the free ticket numbers
-- KEYS[3]  ev:{E}:wait     sorted set: waiting user id -> place
-- KEYS[4]  ev:{E}:waiting  hash: waiting user id -> their order message's head
-- ARGV[1]  the user's field, "=<user id>"
-- ARGV[2]  the user id
-- ARGV[3]  the user's order message head (WaitHead)
-- ARGV[4]  the caller's clock (epoch ms)
-- ARGV[5]  the opening field of the caller's history (grab.lua's ARGV[7]); empty in cluster mode
-- Returns one string:
--   JOINED:<position> | WAITING:<position> (joined before) | HOLDS:<order id>:<ticket no> |
--   CANCELLED | NOT_STARTED | CLOSED (the cancellation window is over) | NOT_SOLD_OUT | FULL |
--   NOT_FOUND | STALE

if #ARGV ~= 5 then
  return redis.error_reply('ERR wait: expected user field, user, head, clock, opening field')
end
local opening = ARGV[5]
if opening == '' then
  opening = 'open_from@' .. string.sub(redis.call('CLUSTER', 'MYID'), 1, 12)
end
local m = redis.call('HMGET', KEYS[1], opening, ARGV[1], 'start', 'cancel_until', 'wait_max')
if not m[1] then
  if redis.call('EXISTS', KEYS[1]) == 1 then
    return 'STALE'
  end
  return 'NOT_FOUND'
end
local held = m[2]
if held and string.byte(held, 1) ~= 35 then
  if string.byte(held, 1) == 33 then -- '!'
    return 'CANCELLED'
  end
  return 'HOLDS:' .. held
end
local now = tonumber(ARGV[4])
if now < tonumber(m[3]) then
  return 'NOT_STARTED'
end
if now >= tonumber(m[4]) then
  return 'CLOSED'
end
local rank = redis.call('ZRANK', KEYS[3], ARGV[2])
if rank then
  return 'WAITING:' .. (rank + 1)
end
if redis.call('LLEN', KEYS[2]) > 0 then
  return 'NOT_SOLD_OUT'
end
local size = redis.call('ZCARD', KEYS[3])
if size >= tonumber(m[5]) then
  return 'FULL'
end
-- Places count up from the last one, so a rebuilt meta hash cannot reorder the line.
local place = 1
local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
if #last == 2 then
  place = tonumber(last[2]) + 1
end
redis.call('ZADD', KEYS[3], place, ARGV[2])
redis.call('HSET', KEYS[4], ARGV[2], ARGV[3])
if size == 0 then
  -- The waitlist is forgotten with the event's cache.
  local forget_at = redis.call('PEXPIRETIME', KEYS[1])
  if forget_at > 0 then
    redis.call('PEXPIREAT', KEYS[3], forget_at)
    redis.call('PEXPIREAT', KEYS[4], forget_at)
  end
end
return 'JOINED:' .. (size + 1)
