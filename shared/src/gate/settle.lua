-- Settles a take at the user's home bucket of a sharded event (docs/DESIGN.md section 6,
-- "Buckets"), the third step: the number the sibling gave becomes the user's holding and the
-- order goes to the outbox, exactly as a grab's; or, with none left there, the mark moves on to the
-- next sibling, or the grab is refused SOLD_OUT. Only the mark this take wrote is settled, so
-- settling again (a retry, reconcile) changes nothing.
--
-- KEYS[1]  ev:{H}:meta     the user's field: "@<bucket>:<order id>" while the take is under way
-- KEYS[2]  ev:{H}:outbox   order id -> order message
-- KEYS[3]  ev:{H}:taking   order id -> the order message's head (grab.lua wrote it with the mark)
-- ARGV[1]  the user's field, "=<user id>"
-- ARGV[2]  the order id
-- ARGV[3]  the sibling bucket taken from
-- ARGV[4]  the number it gave, or "-" (none left)
-- ARGV[5]  the next sibling to take from, or "" (none: every bucket was asked)
-- ARGV[6]  the refusal counter to write when every sibling was empty ("#<window end>:<count>", as
--          grab.lua would have written it)
-- ARGV[7]  the opening field of the caller's history (grab.lua's ARGV[7])
-- Returns one string:
--   OK:<ticket no> | TAKE:<bucket> (marked for the next sibling) | SOLD_OUT |
--   ALREADY:<order id>:<ticket no> | CANCELLED:<order id> (settled before: what the user holds) |
--   GONE (no such take under way: the cache was rebuilt meanwhile) | NOT_FOUND | STALE

if #ARGV ~= 7 then
  return redis.error_reply('ERR settle: expected user field, order id, bucket, number, next bucket, refusal counter, opening field')
end
local m = redis.call('HMGET', KEYS[1], opening, ARGV[1])
if not m[1] then
  return uncached(KEYS[1])
end
local held, order = m[2], ARGV[2]
if held ~= '@' .. ARGV[3] .. ':' .. order then
  if held then
    local mark = string.byte(held, 1)
    if mark == 33 then
      return 'CANCELLED:' .. string.sub(held, 2)
    elseif mark ~= 35 and mark ~= 64 then
      return 'ALREADY:' .. held
    end
  end
  return 'GONE'
end
if ARGV[4] ~= '-' then
  local head = redis.call('HGET', KEYS[3], order)
  if not head then
    return redis.error_reply('ERR settle: a take without its head')
  end
  redis.call('HDEL', KEYS[3], order)
  redis.call('HSET', KEYS[1], ARGV[1], order .. ':' .. ARGV[4])
  redis.call('HSET', KEYS[2], order, head .. ',"ticket_no":' .. ARGV[4] .. '}')
  return 'OK:' .. ARGV[4]
end
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[1], ARGV[1], '@' .. ARGV[5] .. ':' .. order)
  return 'TAKE:' .. ARGV[5]
end
redis.call('HDEL', KEYS[3], order)
redis.call('HSET', KEYS[1], ARGV[1], ARGV[6])
return 'SOLD_OUT'
