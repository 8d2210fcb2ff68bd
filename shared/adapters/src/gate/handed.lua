-- A sharded event's promotion settled at its user's home: bucket 0's record of it is marked done
-- ("="), unless it changed meanwhile, and the user leaves the line if they are still in it (a
-- join's promotion whose user joined again while it was stopped). docs/DESIGN.md section 6,
-- "Buckets". A hand asked again then answers GONE, and reconcile leaves it.
--
-- KEYS[1]  ev:{E}:handed   hand id -> the promotion's order message, or "="
-- KEYS[2]  ev:{E}:wait     sorted set: waiting user id -> place
-- KEYS[3]  ev:{E}:waiting  hash: waiting user id -> their order message's head
-- ARGV[1]  the hand's id
-- ARGV[2]  the record as settled
-- ARGV[3]  the promoted user's id
-- Returns 1 when marked, 0 when the record had changed (nothing done).

if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], '=')
redis.call('ZREM', KEYS[2], ARGV[3])
redis.call('HDEL', KEYS[3], ARGV[3])
return 1
