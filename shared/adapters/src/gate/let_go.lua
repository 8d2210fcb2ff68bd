-- A sharded event's give-back, first step (docs/DESIGN.md section 6, "Buckets"), at the cancelling
-- user's home bucket: the user lets go of the cancelled order ('!<order id>': no second ticket) and
-- the number is kept in `giving` under that order while bucket 0's line hands it on (hand.lua,
-- then promote.lua at the receiver's home). The last step removes the entry, so a give-back asked
-- again finds the user let go and nothing in hand: given back before.
--
-- KEYS[1]  ev:{H}:meta     the cancelling user's field holds "<order id>:<ticket no>" until now;
--                          `generation`, which every later step of the give-back is held to
-- KEYS[2]  ev:{H}:giving   hash: cancelled order id -> ticket no, while it is handed on
-- ARGV[1]  the cancelling user's field, "=<user id>"
-- ARGV[2]  the holding cancelled, "<order id>:<ticket no>"
-- ARGV[3]  the cancelled order id
-- ARGV[4]  the ticket number
-- ARGV[5]  the opening field of the caller's history (grab.lua's ARGV[7])
-- Returns one string:
--   HAND:<generation> (the number is in hand: hand it on, in this lay-down) |
--   GONE (given back before: nothing done) |
--   NOT_FOUND | STALE

if #ARGV ~= 5 then
  return redis.error_reply('ERR let_go: expected user field, holding, order id, ticket no, opening field')
end
local m = redis.call('HMGET', KEYS[1], opening, ARGV[1], 'generation')
if not m[1] then
  return uncached(KEYS[1])
end
if m[2] == ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], '!' .. ARGV[3])
  redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
  lasting(KEYS[1], KEYS[2])
  return 'HAND:' .. m[3]
end
if m[2] == '!' .. ARGV[3] and redis.call('HEXISTS', KEYS[2], ARGV[3]) == 1 then
  return 'HAND:' .. m[3]
end
return 'GONE'
