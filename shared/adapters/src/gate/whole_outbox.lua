-- A bucket's outbox, read only while the bucket is cached in the caller's history: nothing of it
-- was lost, so it holds every order of the bucket not yet stored. What a lost sent record is laid
-- down again from (gate/sent.rs).
--
-- KEYS[1]  ev:{B}:meta     `generation`; its expiry is the cache's
-- KEYS[2]  ev:{B}:outbox
-- ARGV[1]  the opening field of the caller's history (grab.lua's ARGV[7])
-- Returns { generation, expiry (epoch ms), order id, message, order id, message, ... }, or the
-- preamble's NOT_FOUND | STALE.

local m = redis.call('HMGET', KEYS[1], opening, 'generation')
if not m[1] or not m[2] then
  return uncached(KEYS[1])
end
local whole = { m[2], tostring(redis.call('PEXPIRETIME', KEYS[1])) }
local entries = redis.call('HGETALL', KEYS[2])
for i = 1, #entries do
  whole[#whole + 1] = entries[i]
end
return whole
