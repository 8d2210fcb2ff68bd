-- The consumer's last step for an order DynamoDB now holds (gate/outbox.rs): its outbox entry
-- leaves, but only while no rebuild has the bucket stopped. A rebuild reads the outboxes after it
-- stops them, then DynamoDB a settle later: an entry removed before the stop belongs to an order
-- stored before it, which its index shows by then; one stored after the stop keeps its entry until
-- reconcile finds the order durable.
--
-- KEYS[1]  the bucket's meta
-- KEYS[2]  the bucket's outbox
-- ARGV[1]  the opening field of the caller's history (grab.lua's ARGV[7])
-- ARGV[2]  the order id
-- Returns 1 (removed, or not there) | 0 (left: stopped, or not cached in this history)

if redis.call('HEXISTS', KEYS[1], opening) == 0 then
  return 0
end
redis.call('HDEL', KEYS[2], ARGV[2])
return 1
