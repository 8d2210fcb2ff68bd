-- Asks the cache, before the consumer stores an order, whether it counts that order; and if it
-- does not, whether it can still take it. A message the cache never counted exists only when it
-- reached the consumer after a lost cache was rebuilt without it: a send its grab gave up on (the
-- user was told 503) that landed late, or an order still queued when a rebuild stopped waiting
-- (REBUILD_MAX_WAIT_SECONDS). Stored blindly, it would take a number the rebuilt cache may have
-- sold again, and the user told 202 for that number would end REJECTED.
--
-- KEYS[1]  ev:{E}:meta     the user's field (grab.lua); `generation`; `arrivals` counts the numbers
--                          put on sale here
-- KEYS[2]  ev:{E}:seats    the free ticket numbers
-- KEYS[3]  ev:{E}:moved    (a sharded event) move id -> generation, the moves that arrived here
-- ARGV[1]  the user's field, "=<user id>"
-- ARGV[2]  the order's holding, "<order id>:<ticket no>"
-- ARGV[3]  the ticket number
-- ARGV[4]  the opening field of the caller's history (grab.lua's ARGV[7])
-- ARGV[5]  a sharded event's step (docs/DESIGN.md section 6, "Buckets"): "" decides here alone;
--          "look" answers ELSEWHERE instead of TAKEN (the number may be free in another bucket:
--          move_out.lua claims it there); "claimed" when it did: the number arrives here with
--          the move ARGV[6] of the lay-down ARGV[7], once (home's seats untouched), and is taken
--          in, or put on sale here when the user does not take it
-- ARGV[6]  ("claimed") the move's id
-- ARGV[7]  ("claimed") the generation its record names
-- Returns one string:
--   COUNTED (the user holds this order, or cancelled it) | ADOPTED (the user held nothing and the
--   number was free: both are the order's now) | TAKEN (the user held nothing, the number went to
--   someone else: the order is to be stored REJECTED, and the user's field names it now, as a
--   rebuild names a rejected order, so a retry is told of it rather than given a second order) |
--   UNCOUNTED (the user holds another order: this one must not be stored) |
--   ELSEWHERE (ARGV[5] "look": the user held nothing and the number is not free here; nothing
--   written) | GONE ("claimed", and a rebuild laid the cache down since the claim: nothing done) |
--   NOT_FOUND | STALE (no cache in this history to ask: the rebuild waits for the queue to drain,
--   so the order is stored and counted by it)

if #ARGV ~= 5 and #ARGV ~= 7 then
  return redis.error_reply('ERR admit: expected user field, holding, ticket no, opening field, step[, move id, generation]')
end
local m = redis.call('HMGET', KEYS[1], opening, ARGV[1], 'generation')
if not m[1] then
  return uncached(KEYS[1])
end
local held = m[2]
local claimed = ARGV[5] == 'claimed'
if claimed then
  if m[3] ~= ARGV[7] then
    return 'GONE'
  end
  -- The claimed number arrives once: asked again, the user's field answers as it stands.
  if redis.call('HSETNX', KEYS[3], ARGV[6], ARGV[7]) == 0 then
    claimed = false
  else
    lasting(KEYS[1], KEYS[3])
  end
end
-- A number claimed for this order that the user does not take in is on sale here: it was free
-- where it was claimed, and must stay free.
local function put_on_sale()
  if claimed then
    redis.call('RPUSH', KEYS[2], ARGV[3])
    lasting(KEYS[1], KEYS[2])
    redis.call('HINCRBY', KEYS[1], 'arrivals', 1)
  end
end
if held == ARGV[2] then
  return 'COUNTED'
end
local order_id = string.sub(ARGV[2], 1, string.find(ARGV[2], ':', 1, true) - 1)
if held == '!' .. order_id then
  -- Counted, then cancelled (a consumer that claimed again after another stored it).
  put_on_sale()
  return 'COUNTED'
end
if held and string.byte(held, 1) ~= 35 then -- another order, or another cancelled one
  put_on_sale()
  return 'UNCOUNTED'
end
if ARGV[5] == 'claimed' and not claimed then
  -- Arrived before, and the user holds nothing since: the order was let go (a rebuild is the
  -- only other writer, and it changes the generation). Nothing to take.
  return 'UNCOUNTED'
end
-- Rare (a late send after a rebuild): the scan of the free numbers costs nothing on the hot path.
local free = claimed or redis.call('LREM', KEYS[2], 1, ARGV[3]) == 1
if not free and ARGV[5] == 'look' then
  return 'ELSEWHERE'
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if free then
  return 'ADOPTED'
end
return 'TAKEN'
