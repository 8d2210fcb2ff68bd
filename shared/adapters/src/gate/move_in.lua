-- A sharded event's numbers on their way between buckets (docs/DESIGN.md section 6, "Buckets"),
-- second step, at the bucket they go to: they go on sale here, once. The move's id is kept in
-- `moved`, so the step asked again (the home's next grab, reconcile) adds nothing; and only in the
-- lay-down the move began in (`generation`): after a rebuild, which laid every number down again
-- from DynamoDB, a move begun before it moves nothing.
--
-- KEYS[1]  ev:{B}:meta     the opening field; `generation`; `arrivals` counts the moves in
-- KEYS[2]  ev:{B}:seats    the bucket's free numbers
-- KEYS[3]  ev:{B}:moved    hash: move id -> generation, the moves that arrived here
-- ARGV[1]  the opening field of the caller's history (grab.lua's ARGV[7])
-- ARGV[2]  the move's id
-- ARGV[3]  the generation its record names
-- ARGV[4]  its numbers, "<n>,<n>,..."
-- Returns one string: ARRIVED (now or before) | GONE (another lay-down: nothing done) |
--   NOT_FOUND | STALE

if #ARGV ~= 4 then
  return redis.error_reply('ERR move_in: expected opening field, move id, generation, numbers')
end
local m = redis.call('HMGET', KEYS[1], opening, 'generation')
if not m[1] then
  return uncached(KEYS[1])
end
if m[2] ~= ARGV[3] then
  return 'GONE'
end
if redis.call('HSETNX', KEYS[3], ARGV[2], ARGV[3]) == 0 then
  return 'ARRIVED'
end
lasting(KEYS[1], KEYS[3])
for n in string.gmatch(ARGV[4], '%d+') do
  redis.call('RPUSH', KEYS[2], n)
end
redis.call('HINCRBY', KEYS[1], 'arrivals', 1)
lasting(KEYS[1], KEYS[2])
return 'ARRIVED'
