-- A sharded event's give-back, second step (docs/DESIGN.md section 6, "Buckets"), at bucket 0,
-- where the waitlist's line is: the number in hand goes to the line's head as a promotion (the
-- order message is recorded in `handed` under the hand's id, in the step that pops the head, so
-- asked again it answers the same head), or, with nobody waiting, on sale in bucket 0 during the
-- sale or to `returned` after it. promote.lua then settles the promotion at the head's home. A
-- head found there holding an order or a cancelled one can never take it (neither ever goes back
-- to nothing): asked with that record, the next head is popped, with an order id of its own.
--
-- KEYS[1]  ev:{E}:meta     end; the opening field; `generation`; `arrivals` counts the numbers
--                          put on sale here
-- KEYS[2]  ev:{E}:wait     sorted set: waiting user id -> place
-- KEYS[3]  ev:{E}:waiting  hash: waiting user id -> their order message's head (WaitHead)
-- KEYS[4]  ev:{E}:handed   hash: hand id -> the promotion's order message, or "=" once settled
-- KEYS[5]  ev:{E}:seats    bucket 0's numbers on sale
-- KEYS[6]  ev:{E}:returned numbers returned after the sale's end with nobody waiting
-- ARGV[1]  the hand's id: the cancelled order's id (a join's promotion id: wait.lua's records)
-- ARGV[2]  the ticket number
-- ARGV[3]  the tail a promotion of a newly popped head gets, before the number:
--          ,"order_id":...,"created_at":... (a fresh order id each call: one per head)
-- ARGV[4]  when the order was cancelled (epoch ms): at or after the end, nobody waiting means returned
-- ARGV[5]  the record the caller found the head of unable to take it (skip it), or ""
-- ARGV[6]  the opening field of the caller's history (grab.lua's ARGV[7])
-- ARGV[7]  the generation the give-back began in (let_go.lua): a rebuild since means RELAID
-- Returns one string:
--   HEAD:<order message> (settle it at its user's home) | FREED | RETURNED |
--   GONE (settled before: nothing done) | RELAID (laid down again since: nothing done, and the
--   give-back's marker drives it afresh) | LOST (the line and its heads disagree: a key of the
--   line is lost; nothing done) | NOT_FOUND | STALE

if #ARGV ~= 7 then
  return redis.error_reply('ERR hand: expected hand id, ticket no, tail, cancelled at, skipped record, opening field, generation')
end
local m = redis.call('HMGET', KEYS[1], opening, 'end', 'generation')
if not m[1] then
  return uncached(KEYS[1])
end
if m[3] ~= ARGV[7] then
  return 'RELAID'
end
local record = redis.call('HGET', KEYS[4], ARGV[1])
if record == '=' then
  return 'GONE'
end
-- Every place in the line has its head (give_back.lua says why): otherwise a key of it is lost.
if not record and redis.call('ZCARD', KEYS[2]) ~= redis.call('HLEN', KEYS[3]) then
  return 'LOST'
end
if record and record ~= ARGV[5] then
  return 'HEAD:' .. record
end

local function keep(value)
  redis.call('HSET', KEYS[4], ARGV[1], value)
  lasting(KEYS[1], KEYS[4])
end

-- The head of the line, skipping anyone whose head went missing.
while true do
  local head = redis.call('ZPOPMIN', KEYS[2])
  if #head == 0 then
    keep('=')
    local list = KEYS[5]
    if tonumber(ARGV[4]) >= tonumber(m[2]) then
      list = KEYS[6]
    end
    redis.call('RPUSH', list, ARGV[2])
    lasting(KEYS[1], list)
    if list == KEYS[6] then
      return 'RETURNED'
    end
    redis.call('HINCRBY', KEYS[1], 'arrivals', 1)
    return 'FREED'
  end
  local message = redis.call('HGET', KEYS[3], head[1])
  redis.call('HDEL', KEYS[3], head[1])
  if message then
    message = message .. ARGV[3] .. ',"ticket_no":' .. ARGV[2] .. '}'
    keep(message)
    return 'HEAD:' .. message
  end
end
