-- Puts a user on the event's waitlist, once, in arrival order, within its size; after the sale's
-- end, hands a returned number nobody waited for to the user at once.
--
-- KEYS[1]  ev:{E}:meta     start, end, cancel_until (ms), wait_max, closed; the user's field (grab.lua)
-- KEYS[2]  ev:{E}:seats    the numbers on sale
-- KEYS[3]  ev:{E}:wait     sorted set: waiting user id -> place
-- KEYS[4]  ev:{E}:waiting  hash: waiting user id -> their order message's head (WaitHead)
-- KEYS[5]  ev:{E}:returned list: numbers returned after the sale's end with nobody waiting
-- KEYS[6]  ev:{E}:outbox   order id -> order message
-- KEYS[7]  ev:{E}:handed   hand id -> a promotion's order message (a sharded event: hand.lua)
-- ARGV[1]  the user's field, "=<user id>"
-- ARGV[2]  the user id
-- ARGV[3]  the user's order message head (WaitHead)
-- ARGV[4]  the caller's clock (epoch ms)
-- ARGV[5]  the opening field of the caller's history (grab.lua's ARGV[7])
-- ARGV[6]  the order id an at-once promotion gets (made by the caller)
-- ARGV[7]  its message's tail before the number: ,"order_id":...,"created_at":...
-- ARGV[8]  "" when the user's field lives in KEYS[1] (an unsharded event, or a user homed at bucket
--          0); otherwise the field as read at the user's home bucket, "-" for none (a sharded
--          event's line is bucket 0's: docs/DESIGN.md section 6, "Buckets")
-- ARGV[9]  the numbers on sale in the event's other buckets (0 unsharded)
-- ARGV[10] the id an at-once promotion of a user homed elsewhere is recorded under in KEYS[7]
-- Returns one string:
--   JOINED:<position>:<place> | WAITING:<position>:<place> (joined before) |
--   PROMOTED:<ticket no> (a returned number, the user's now: its order is in the outbox) |
--   HANDED:<ticket no>:<generation> (the same for a user homed at another bucket: recorded in
--   KEYS[7] under ARGV[10], for promote.lua to settle at the user's home, in that lay-down) |
--   HOLDS:<order id>:<ticket no> | CANCELLED | NOT_STARTED |
--   CLOSED (past cancel_until, or closed: no ticket can come back) | NOT_SOLD_OUT | FULL |
--   NOT_FOUND | STALE

if #ARGV ~= 10 then
  return redis.error_reply('ERR wait: expected user field, user, head, clock, opening field, order id, tail, home field, elsewhere on sale, hand id')
end
local m = redis.call('HMGET', KEYS[1], opening, ARGV[1], 'start', 'end', 'cancel_until', 'wait_max', 'closed')
if not m[1] then
  return uncached(KEYS[1])
end
local held = m[2]
if ARGV[8] ~= '' then
  held = nil
  if ARGV[8] ~= '-' then
    held = ARGV[8]
  end
end
if held and string.byte(held, 1) ~= 35 then
  local mark = string.byte(held, 1)
  if mark == 33 then -- '!'
    return 'CANCELLED'
  end
  return 'HOLDS:' .. held
end
local now = tonumber(ARGV[4])
if now < tonumber(m[3]) then
  return 'NOT_STARTED'
end
if now >= tonumber(m[5]) or m[7] then
  return 'CLOSED'
end
local rank = redis.call('ZRANK', KEYS[3], ARGV[2])
if rank then
  return 'WAITING:' .. (rank + 1) .. ':' .. redis.call('ZSCORE', KEYS[3], ARGV[2])
end
local size = redis.call('ZCARD', KEYS[3])
if now < tonumber(m[4]) then
  -- During the sale a user who could grab should grab.
  if redis.call('LLEN', KEYS[2]) > 0 or ARGV[9] ~= '0' then
    return 'NOT_SOLD_OUT'
  end
elseif size == 0 then
  -- After it, a number returned while nobody waited is held for the next who asks.
  local n = redis.call('LPOP', KEYS[5])
  if n then
    local message = ARGV[3] .. ARGV[7] .. ',"ticket_no":' .. n .. '}'
    if ARGV[8] ~= '' then
      redis.call('HSET', KEYS[7], ARGV[10], message)
      lasting(KEYS[1], KEYS[7])
      return 'HANDED:' .. n .. ':' .. redis.call('HGET', KEYS[1], 'generation')
    end
    redis.call('HSET', KEYS[1], ARGV[1], ARGV[6] .. ':' .. n)
    redis.call('HSET', KEYS[6], ARGV[6], message)
    return 'PROMOTED:' .. n
  end
end
if size >= tonumber(m[6]) then
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
return 'JOINED:' .. (size + 1) .. ':' .. place
