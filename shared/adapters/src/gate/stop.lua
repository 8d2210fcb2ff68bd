-- The exact rebuild's first step (docs/DESIGN.md section 10), at each bucket of the event: the
-- bucket stops deciding (its opening field goes, so every script answers STALE) and remembers which
-- rebuild stopped it last. Only that rebuild may open it again (open.lua): a rebuild that was
-- overtaken (its lock expired, another stopped the bucket since) cannot lay down an older snapshot.
-- It also says whether the bucket is intact: open in this history when it stopped (nothing of it
-- lost since it was laid down), remembered in meta under `stopped@<history>` so a rebuild that
-- stops it again after another was halted knows it too. An intact bucket's outbox holds every
-- order of it not yet stored; a bucket lost or written in another history needs its sent record.
--
-- KEYS[1]  ev:{B}:meta     the opening fields removed
-- KEYS[2]  ev:{B}:stop     the token of the rebuild that stopped the bucket last
-- ARGV[1]  the opening field of the caller's history (grab.lua's ARGV[7])
-- ARGV[2]  the rebuild's token
-- ARGV[3]  how long the token is kept (ms): longer than any rebuild
-- ARGV[4]  the older layouts' opening field, before its history (keys::older_openings): a cache
--          an older release laid out stops too
-- Returns 2 when the bucket was open in this history until now (live: it may have decided, and
-- the consumer removed entries, a moment ago), 1 when intact but stopped before, 0 when not intact.

if #ARGV ~= 4 then
  return redis.error_reply('ERR stop: expected opening field, token, ms, older opening prefix')
end
local history = string.sub(opening, #opening - 11)
local stopped = 'stopped@' .. history
local live = redis.call('HEXISTS', KEYS[1], opening) == 1
local intact = live or redis.call('HEXISTS', KEYS[1], stopped) == 1
redis.call('HDEL', KEYS[1], opening, ARGV[4] .. history)
if intact then
  redis.call('HSET', KEYS[1], stopped, ARGV[2])
end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
if live then
  return 2
end
if intact then
  return 1
end
return 0
