-- A sharded event's numbers on their way from one bucket to another (docs/DESIGN.md section 6,
-- "Buckets"), first step, at the bucket they leave: a home with none left asks a sibling, which
-- gives some of its free numbers, recorded under the move's id in the same step (so the move asked
-- again answers the same, and numbers never leave twice). move_in.lua puts them on sale at the
-- home; then the record goes. The numbers are never a user's while they move.
--
-- KEYS[1]  ev:{B}:meta     the opening field; `generation` (the lay-down this bucket is of)
-- KEYS[2]  ev:{B}:seats    the bucket's free numbers
-- KEYS[3]  ev:{B}:moving   hash: move id -> "<generation>|<to bucket>|<ms>|<n>,<n>,...|<user>|<order>"
-- ARGV[1]  the opening field of the caller's history (grab.lua's ARGV[7])
-- ARGV[2]  the move's id (made by the caller)
-- ARGV[3]  the bucket they go to
-- ARGV[4]  the most numbers to move: half of what is free here (rounded up) is moved, up to this
-- ARGV[5]  "" to move any free numbers; a ticket number to move that very one (a late order's
--          claim: admit.lua then holds it for ARGV[6]'s order at its user's home)
-- ARGV[6]  for a claim, "<user id>|<order id>"; otherwise ""
-- Returns one string:
--   MOVING:<record> (on their way, now or before) | NONE:<generation> (none free here: nothing
--   written) | NOT_FOUND | STALE

if #ARGV ~= 6 then
  return redis.error_reply('ERR move_out: expected opening field, move id, to bucket, most, number, claim')
end
local m = redis.call('HMGET', KEYS[1], opening, 'generation')
if not m[1] then
  return uncached(KEYS[1])
end
local record = redis.call('HGET', KEYS[3], ARGV[2])
if record then
  return 'MOVING:' .. record
end
local numbers
if ARGV[5] ~= '' then
  if redis.call('LREM', KEYS[2], 1, ARGV[5]) == 0 then
    return 'NONE:' .. m[2]
  end
  numbers = { ARGV[5] }
else
  local half = math.ceil(redis.call('LLEN', KEYS[2]) / 2)
  if half == 0 then
    return 'NONE:' .. m[2]
  end
  numbers = redis.call('LPOP', KEYS[2], math.min(half, tonumber(ARGV[4])))
end
local time = redis.call('TIME')
local ms = time[1] * 1000 + math.floor(time[2] / 1000)
record = m[2] .. '|' .. ARGV[3] .. '|' .. ms .. '|' .. table.concat(numbers, ',') .. '|' .. ARGV[6]
redis.call('HSET', KEYS[3], ARGV[2], record)
lasting(KEYS[1], KEYS[3])
return 'MOVING:' .. record
