-- A sharded event's promotion, settled at the promoted user's home bucket (docs/DESIGN.md
-- section 6, "Buckets"): the last step of a give-back (after hand.lua) or of a join handed a
-- returned number (after wait.lua). The user holds the number and the order goes to the outbox,
-- exactly as give_back.lua does on an unsharded event, if the user holds nothing; settling again
-- changes nothing.
--
-- KEYS[1]  ev:{H}:meta     the promoted user's field
-- KEYS[2]  ev:{H}:outbox   order id -> order message
-- ARGV[1]  the user's field, "=<user id>"
-- ARGV[2]  the promotion's holding, "<order id>:<ticket no>"
-- ARGV[3]  the promotion's order message
-- ARGV[4]  the opening field of the caller's history (grab.lua's ARGV[7])
-- Returns one string:
--   PROMOTED | ALREADY (settled before: the user holds it, or has cancelled it since) |
--   SKIP:<field> (the user holds another order, cancelled one, or is taking one: the next head's) |
--   NOT_FOUND | STALE

if #ARGV ~= 4 then
  return redis.error_reply('ERR promote: expected user field, holding, message, opening field')
end
local m = redis.call('HMGET', KEYS[1], opening, ARGV[1])
if not m[1] then
  return uncached(KEYS[1])
end
local held = m[2]
local order_id = string.sub(ARGV[2], 1, string.find(ARGV[2], ':', 1, true) - 1)
if held == ARGV[2] or held == '!' .. order_id then
  return 'ALREADY'
end
if held and string.byte(held, 1) ~= 35 then -- not a rate counter ('#')
  return 'SKIP:' .. held
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], order_id, ARGV[3])
return 'PROMOTED'
