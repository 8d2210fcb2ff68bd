-- Puts back a number a sharded event's bucket gave to a take that can no longer be settled (its
-- user's mark at home is gone: the home was rebuilt, or the grab gave up), found by reconcile
-- (docs/DESIGN.md section 6, "Buckets"). Only the record reconcile read is returned, in the step
-- that removes it, so a number is put back once.
--
-- KEYS[1]  ev:{B}:seats    the bucket's free numbers
-- KEYS[2]  ev:{B}:taken    order id -> "<ticket no>:<user id>"
-- ARGV[1]  the order id
-- ARGV[2]  the record as reconcile read it, "<ticket no>:<user id>"
-- ARGV[3]  the ticket number
-- Returns 1 when the number was put back, 0 when the record had changed (nothing done).

if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then
  return 0
end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('RPUSH', KEYS[1], ARGV[3])
return 1
