-- Whether one bucket of an event is cached in the caller's history: its opening field, which the
-- preamble completes with the node's id in cluster mode, so one round trip asks it (gate/buckets.rs).
--
-- KEYS[1]  ev:{B}:meta
-- ARGV[1]  the opening field of the caller's history (grab.lua's ARGV[7])
-- Returns 1 when cached, 0 when not.

return redis.call('HEXISTS', KEYS[1], opening)
