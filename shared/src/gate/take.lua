-- A sharded event's sibling bucket gives a number to a user homed elsewhere (docs/DESIGN.md
-- section 6, "Buckets"): the second step of a take, after grab.lua marked the user at home and
-- before settle.lua settles it there. The number and the order it went to are recorded in one
-- step, so the take asked again (a retry, reconcile) answers the same and never takes twice.
--
-- KEYS[1]  ev:{B}:meta     the opening field only (is this bucket cached in this history?)
-- KEYS[2]  ev:{B}:seats    the bucket's free numbers
-- KEYS[3]  ev:{B}:taken    hash: order id -> "<ticket no>:<user id>", or "-:<user id>" (none left)
-- ARGV[1]  the order id
-- ARGV[2]  the user id (for reconcile, which finds their home from it)
-- ARGV[3]  the opening field of the caller's history (grab.lua's ARGV[7])
-- Returns one string: TAKEN:<ticket no> | TAKEN:- (none left) | NOT_FOUND | STALE

if #ARGV ~= 3 then
  return redis.error_reply('ERR take: expected order id, user, opening field')
end
if redis.call('HEXISTS', KEYS[1], opening) == 0 then
  return uncached(KEYS[1])
end
local was = redis.call('HGET', KEYS[3], ARGV[1])
if was then
  return 'TAKEN:' .. string.sub(was, 1, string.find(was, ':', 1, true) - 1)
end
local n = redis.call('LPOP', KEYS[2]) or '-'
redis.call('HSET', KEYS[3], ARGV[1], n .. ':' .. ARGV[2])
lasting(KEYS[1], KEYS[3])
return 'TAKEN:' .. n
