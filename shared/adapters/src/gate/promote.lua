-- A sharded event's promotion, settled at the promoted user's home bucket (docs/DESIGN.md
-- section 6, "Buckets"): the last step of a give-back (after hand.lua) or of a join handed a
-- returned number (after wait.lua). The user holds the number and the order goes to the outbox,
-- exactly as give_back.lua does on an unsharded event, if the user holds nothing; settling again
-- changes nothing. A user holding another order, or a cancelled one, never can take it: neither
-- state goes back to nothing, so every driver of the same record finds the same.
--
-- KEYS[1]  ev:{H}:meta     the promoted user's field; `generation`
-- KEYS[2]  ev:{H}:outbox   order id -> order message
-- ARGV[1]  the user's field, "=<user id>"
-- ARGV[2]  the promotion's order id
-- ARGV[3]  its ticket number
-- ARGV[4]  its order message
-- ARGV[5]  the opening field of the caller's history (grab.lua's ARGV[7])
-- ARGV[6]  the generation the hand was made in: a rebuild since means RELAID
-- Returns one string:
--   PROMOTED | ALREADY (settled before: the user holds it, or has cancelled it since) |
--   SKIP:<field> (the user holds another order, or cancelled one: the next head's turn) |
--   RELAID (laid down again since: nothing done) | NOT_FOUND | STALE

if #ARGV ~= 6 then
  return redis.error_reply('ERR promote: expected user field, order id, ticket no, message, opening field, generation')
end
local m = redis.call('HMGET', KEYS[1], opening, ARGV[1], 'generation')
if not m[1] then
  return uncached(KEYS[1])
end
if m[3] ~= ARGV[6] then
  return 'RELAID'
end
local held, order_id = m[2], ARGV[2]
local holding = order_id .. ':' .. ARGV[3]
if held == holding or held == '!' .. order_id then
  return 'ALREADY'
end
if held and string.byte(held, 1) ~= 35 then -- not a rate counter ('#')
  return 'SKIP:' .. held
end
redis.call('HSET', KEYS[1], ARGV[1], holding)
redis.call('HSET', KEYS[2], order_id, ARGV[4])
return 'PROMOTED'
