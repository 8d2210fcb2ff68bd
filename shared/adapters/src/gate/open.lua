-- The exact rebuild's last step (docs/DESIGN.md section 10), at each bucket of the event: the keys
-- laid down under staged names take the live names in one step, and the bucket decides again, but
-- only if the rebuild that laid them is still the one that stopped the bucket last (stop.lua). A
-- rebuild overtaken meanwhile opens nothing: its staged keys go, and the rebuild that stopped the
-- bucket since lays it down from its own, later snapshot. The outbox is left as it is, but for the
-- promotions the rebuild made, which join it here.
--
-- KEYS[1]             ev:{B}:stop     the token of the rebuild that stopped the bucket last
-- KEYS[2 .. 1+2p]     pairs: a live key, then its staged copy (meta first: its opening field is
--                     what opens the bucket)
-- KEYS[2+2p]          ev:{B}:outbox
-- KEYS[3+2p]          the staged promotions: order id -> order message, added to the outbox
-- KEYS[4+2p ..]       keys of steps under way, forgotten (their drivers find them gone)
-- ARGV[1]             the rebuild's token
-- ARGV[2]             p, the number of pairs
-- Returns OPEN | FENCED (another rebuild stopped the bucket since: nothing opened)

local pairs_end = 1 + 2 * tonumber(ARGV[2])
local outbox, promotions = pairs_end + 1, pairs_end + 2
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  for i = 3, pairs_end, 2 do
    redis.call('DEL', KEYS[i])
  end
  redis.call('DEL', KEYS[promotions])
  return 'FENCED'
end
for i = 2, pairs_end, 2 do
  if redis.call('EXISTS', KEYS[i + 1]) == 1 then
    redis.call('RENAME', KEYS[i + 1], KEYS[i])
  else
    redis.call('DEL', KEYS[i])
  end
end
local added = redis.call('HGETALL', KEYS[promotions])
for i = 1, #added, 2 do
  redis.call('HSET', KEYS[outbox], added[i], added[i + 1])
end
for i = promotions, #KEYS do
  redis.call('DEL', KEYS[i])
end
redis.call('DEL', KEYS[1])
return 'OPEN'
