-- Lays down one chunk of a ballot's draw (docs/DESIGN.md section 11): each winner gets the next
-- free number and an order in the outbox, as a grab would; each other entrant a place on the
-- waitlist, as a join would, in draw order. Idempotent: an entrant who already holds, cancelled or
-- waits is left as they are, so a draw interrupted at any step is finished by running it again.
--
-- KEYS[1]  ev:{E}:meta     the users' fields (grab.lua)
-- KEYS[2]  ev:{E}:seats    the free numbers
-- KEYS[3]  ev:{E}:outbox   order id -> order message
-- KEYS[4]  ev:{E}:wait     sorted set: waiting user id -> place
-- KEYS[5]  ev:{E}:waiting  hash: waiting user id -> their order message's head (WaitHead)
-- ARGV[1]  the opening field of the caller's history (grab.lua's ARGV[7])
-- ARGV[2]  how many winners this chunk holds (w)
-- then w triples: user field "=<user>", order id, order message head (grab.lua's ARGV[3])
-- then pairs to the end: user id, place, then its WaitHead as a third: user id, place, head
-- Returns an array: NOT_FOUND or STALE alone, or one "<order id>:<ticket no>" per order granted
-- now (a winner found holding already is not granted again; SOLD_OUT for a winner left without a
-- number, which the exact count of winners makes impossible unless the cache was tampered with).

local w = tonumber(ARGV[2])
if not w or #ARGV < 2 + 3 * w or (#ARGV - 2 - 3 * w) % 3 ~= 0 then
  return redis.error_reply('ERR draw: expected opening field, winners, winner triples, waiter triples')
end
if not redis.call('HGET', KEYS[1], opening) then
  return { uncached(KEYS[1]) }
end

-- Whether a user field holds nothing yet: absent, or only the counter of refused grabs ('#').
local function empty(held)
  return not held or string.byte(held, 1) == 35
end

local granted = {}
for i = 0, w - 1 do
  local field, order, head = ARGV[3 + 3 * i], ARGV[4 + 3 * i], ARGV[5 + 3 * i]
  if empty(redis.call('HGET', KEYS[1], field)) then
    local n = redis.call('LPOP', KEYS[2])
    if not n then
      granted[#granted + 1] = 'SOLD_OUT'
    else
      redis.call('HSET', KEYS[1], field, order .. ':' .. n)
      redis.call('HSET', KEYS[3], order, head .. ',"ticket_no":' .. n .. '}')
      granted[#granted + 1] = order .. ':' .. n
    end
  end
end

local first = 3 + 3 * w
for i = first, #ARGV, 3 do
  local user, place, head = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if empty(redis.call('HGET', KEYS[1], '=' .. user)) and redis.call('ZADD', KEYS[4], 'NX', place, user) == 1 then
    redis.call('HSET', KEYS[5], user, head)
  end
end
-- The waitlist is forgotten with the event's cache.
local forget_at = redis.call('PEXPIRETIME', KEYS[1])
if forget_at > 0 then
  redis.call('PEXPIREAT', KEYS[4], forget_at)
  redis.call('PEXPIREAT', KEYS[5], forget_at)
end
return granted
