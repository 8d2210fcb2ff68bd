-- Gives a cancelled order's ticket number back, in one atomic step: to the head of the waitlist
-- (a new order, written to the outbox like a grab's), or, when nobody waits, back on sale (a
-- cancellation during the sale) or held for the next user who joins the waitlist (a cancellation
-- after the sale's end, or at a ballot, whose sale never opens: nobody can grab it). Run after
-- DynamoDB holds the cancellation; running it again is harmless.
--
-- KEYS[1]  ev:{E}:meta     end; the cancelling user's field holds "<order id>:<ticket no>" until now;
--                          `arrivals` counts the numbers put on sale here
-- KEYS[2]  ev:{E}:seats    the numbers on sale
-- KEYS[3]  ev:{E}:outbox   order id -> order message
-- KEYS[4]  ev:{E}:wait     sorted set: waiting user id -> place (the order they joined in)
-- KEYS[5]  ev:{E}:waiting  hash: waiting user id -> their order message's head (WaitHead)
-- KEYS[6]  ev:{E}:returned list: numbers returned after the sale's end with nobody waiting
-- ARGV[1]  the cancelling user's field, "=<user id>"
-- ARGV[2]  the holding cancelled, "<order id>:<ticket no>"
-- ARGV[3]  the ticket number
-- ARGV[4]  the order id a promotion gets (made by the caller)
-- ARGV[5]  the promotion message's tail before the number: ,"order_id":...,"created_at":...
-- ARGV[6]  the opening field of the caller's history (grab.lua's ARGV[7])
-- ARGV[7]  when the order was cancelled (epoch ms)
-- Returns one string:
--   PROMOTED:<order message> | FREED (on sale again) | RETURNED (held for the waitlist) |
--   GONE (given back already: nothing done) |
--   LOST (the line and its heads disagree: a key of the line is lost; nothing done: the cache is
--   repaired, then run again) |
--   NOT_FOUND | STALE (the cache is lost or predates a failover: rebuild, then run again)

if #ARGV ~= 7 then
  return redis.error_reply('ERR give_back: expected user field, holding, ticket no, order id, tail, opening field, cancelled at')
end
local m = redis.call('HMGET', KEYS[1], opening, ARGV[1], 'end')
if not m[1] then
  return uncached(KEYS[1])
end
if m[2] ~= ARGV[2] then
  return 'GONE'
end
-- Every place in the line has its head (wait.lua, the give-backs and close.lua write and remove
-- both together): a line without its heads, or heads without their line, lost a key.
if redis.call('ZCARD', KEYS[4]) ~= redis.call('HLEN', KEYS[5]) then
  return 'LOST'
end
-- '!' marks a user who cancelled: they hold nothing, and grab tells them so.
local order_id = string.sub(ARGV[2], 1, string.find(ARGV[2], ':', 1, true) - 1)
redis.call('HSET', KEYS[1], ARGV[1], '!' .. order_id)

local function push(list)
  redis.call('RPUSH', list, ARGV[3])
  lasting(KEYS[1], list)
end

-- The head of the waitlist, skipping anyone who meanwhile holds an order or cancelled one.
while true do
  local head = redis.call('ZPOPMIN', KEYS[4])
  if #head == 0 then
    -- A ballot's opening is the latest time the scripts write (gate/cache.rs, NEVER).
    if tonumber(ARGV[7]) >= tonumber(m[3]) or m[1] == '999999999999999' then
      push(KEYS[6])
      return 'RETURNED'
    end
    push(KEYS[2])
    redis.call('HINCRBY', KEYS[1], 'arrivals', 1)
    return 'FREED'
  end
  local user = head[1]
  local message = redis.call('HGET', KEYS[5], user)
  redis.call('HDEL', KEYS[5], user)
  local field = '=' .. user
  local held = redis.call('HGET', KEYS[1], field)
  if message and (not held or string.byte(held, 1) == 35) then -- nothing, or a rate counter ('#')
    redis.call('HSET', KEYS[1], field, ARGV[4] .. ':' .. ARGV[3])
    message = message .. ARGV[5] .. ',"ticket_no":' .. ARGV[3] .. '}'
    redis.call('HSET', KEYS[3], ARGV[4], message)
    return 'PROMOTED:' .. message
  end
end
