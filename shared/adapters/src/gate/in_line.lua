-- Whether a user's place is in the waitlist's line, read while the line is cached in the caller's
-- history (a join asks after its place became durable: a rebuild between the two may have laid
-- the line down from DynamoDB without it).
--
-- KEYS[1]  ev:{E}:meta     the opening field (bucket 0: the line's)
-- KEYS[2]  ev:{E}:wait     the line
-- ARGV[1]  the opening field of the caller's history (grab.lua's ARGV[7])
-- ARGV[2]  the user id
-- Returns IN | OUT | NOT_FOUND | STALE (a rebuild under way, or the cache lost: not known yet)

if not redis.call('HGET', KEYS[1], opening) then
  return uncached(KEYS[1])
end
if redis.call('ZSCORE', KEYS[2], ARGV[2]) then
  return 'IN'
end
return 'OUT'
