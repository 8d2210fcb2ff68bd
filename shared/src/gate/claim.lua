-- A sharded event's late order (docs/DESIGN.md section 6, "Buckets"): admit.lua found its number
-- not free at the user's home, so the bucket where it may be free is asked for that very number.
-- Taken, it is recorded in `taken` under the order id in the same step (as a take's), so asked
-- again it answers the same, and reconcile puts it back if the user's home never comes to hold it
-- (a consumer stopped before admit.lua settled it: `return_take.lua` after STRAY_TAKE_AGE).
--
-- KEYS[1]  ev:{B}:meta     the opening field only (is this bucket cached in this history?)
-- KEYS[2]  ev:{B}:seats    the bucket's free numbers
-- KEYS[3]  ev:{B}:taken    hash: order id -> "<ticket no>:<user id>"
-- ARGV[1]  the order id
-- ARGV[2]  the ticket number
-- ARGV[3]  the user id
-- ARGV[4]  the opening field of the caller's history (grab.lua's ARGV[7])
-- Returns one string: CLAIMED | NONE (not free here) | NOT_FOUND | STALE

if #ARGV ~= 4 then
  return redis.error_reply('ERR claim: expected order id, ticket no, user, opening field')
end
if redis.call('HEXISTS', KEYS[1], opening) == 0 then
  return uncached(KEYS[1])
end
local record = ARGV[2] .. ':' .. ARGV[3]
if redis.call('HGET', KEYS[3], ARGV[1]) == record then
  return 'CLAIMED'
end
if redis.call('LREM', KEYS[2], 1, ARGV[2]) == 1 then
  redis.call('HSET', KEYS[3], ARGV[1], record)
  lasting(KEYS[1], KEYS[3])
  return 'CLAIMED'
end
return 'NONE'
