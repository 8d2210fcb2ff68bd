-- The grab gate: one atomic round trip that decides a grab (docs/DESIGN.md section 6).
--
-- KEYS[1]  ev:{E}:meta     hash; its fields are described once, in gate/keys.rs. Read here: the
--                          opening field (ARGV[7]: cached in this history and layout?) whose value
--                          is start + 10 s, open_until (end - 10 s), and the user's field, which
--                          is written here: a holding on OK, the refusal counter otherwise
-- KEYS[2]  ev:{E}:seats    list: the free ticket numbers
-- KEYS[3]  ev:{E}:outbox   hash: order id -> order message
-- ARGV[1]  the user's field, "=<user id>"
-- ARGV[2]  order id (UUIDv7, made by the caller; used only on OK)
-- ARGV[3]  the order message, a JSON object without its closing brace; the script appends
--          ,"ticket_no":<n>} (splicing: decoding and re-encoding JSON would cost more than the rest)
-- ARGV[4]  rate limit: refused requests allowed per window
-- ARGV[5]  the end of a rate window that would start now (the caller's clock + the window)
-- ARGV[6]  the caller's clock
-- ARGV[7]  "open_from@<layout>@<history>": the field named after the layout and the replication id
--          of the server the caller is connected to (its first 12 hex digits); a cache written in
--          another history (before a failover) or by another layout lacks it.
--          In cluster mode, where the caller cannot know the node, only "open_from@<layout>@": the
--          history is then the node's own id (a promoted replica is another node)
-- ARGV[8]  (a sharded event's home bucket only) "dry": with no number left here, answer DRY and
--          write nothing, so the caller moves numbers here from a sibling bucket and asks again
--          (docs/DESIGN.md section 6, "Buckets"); with the bucket's `generation` and `arrivals` as
--          the emptiness was seen, so the caller knows whether any came here after
-- Returns one string:
--   OK:<ticket no>:<generation> (the bucket's lay-down: the order's sent record takes it only in
--   that one) | ALREADY:<order id>:<ticket no> | CANCELLED:<order id> |
--   RATE_LIMITED:<ms until the window ends> |
--   NOT_FOUND | STALE (cached in another history or layout: rebuild it) | NOT_STARTED | ENDED | SOLD_OUT |
--   DRY:<generation>:<arrivals> (ARGV[8] given, and no number left here: nothing written)
--
-- Cost is mostly Lua's own (docs/BENCHMARKS.md section 3): four redis.call on an OK grab (HMGET, LPOP, HSET meta,
-- HSET outbox), one string back, and no number parsed. Times are epoch milliseconds zero-padded to
-- 15 digits (every RFC 3339 year up to 9999), so they compare as strings: a string compare costs
-- far less than the strtod behind tonumber. A refusal writes only the user's counter. Everything
-- is checked before the first write, so an error cannot leave half a grab.

local now = ARGV[6]
if #ARGV < 7 or #ARGV > 8 or #now ~= 15 or #ARGV[5] ~= 15 then
  return redis.error_reply('ERR grab: expected user field, order, message head, limit, window end, clock (15-digit ms), opening field')
end
local field = ARGV[1]
local m = redis.call('HMGET', KEYS[1], opening, 'open_until', field, 'generation')
if not m[1] then
  return uncached(KEYS[1])
end

-- One ticket per user: a retry gets the order it already has, whatever the counter says.
local held = m[3]
local count, window_end = 0, ARGV[5]
if held then
  local mark = string.byte(held, 1)
  if mark ~= 35 then -- not '#': an order, or one the user cancelled ('!')
    if mark == 33 then
      return 'CANCELLED:' .. string.sub(held, 2)
    end
    return 'ALREADY:' .. held
  end
  -- Rate limit: refused requests in the current fixed window, on the caller's clock.
  local sep = string.find(held, ':', 2, true)
  local held_end = string.sub(held, 2, sep - 1)
  if now < held_end then
    count = tonumber(string.sub(held, sep + 1))
    if count >= tonumber(ARGV[4]) then
      return 'RATE_LIMITED:' .. (tonumber(held_end) - tonumber(now))
    end
    window_end = held_end
  end
end

-- The sale window. Inside [open_from, open_until) the caller's clock puts both boundaries more
-- than 10 s away and decides; elsewhere it decides only when a boundary is more than 10 s away,
-- and near one Redis's TIME does, so the opening and closing seconds are decided on one clock.
local open = now >= m[1] and now < m[2]
local refused
if not open then
  local start_ms, end_ms, t = tonumber(m[1]) - 10000, tonumber(m[2]) + 10000, tonumber(now)
  if t < start_ms - 10000 then
    refused = 'NOT_STARTED'
  elseif t >= end_ms + 10000 then
    refused = 'ENDED'
  else
    local time = redis.call('TIME')
    t = time[1] * 1000 + math.floor(time[2] / 1000)
    if t < start_ms then
      refused = 'NOT_STARTED'
    elseif t >= end_ms then
      refused = 'ENDED'
    else
      open = true
    end
  end
end
if open then
  local n = redis.call('LPOP', KEYS[2])
  if n then
    redis.call('HSET', KEYS[1], field, ARGV[2] .. ':' .. n)
    redis.call('HSET', KEYS[3], ARGV[2], ARGV[3] .. ',"ticket_no":' .. n .. '}')
    return 'OK:' .. n .. ':' .. (m[4] or '')
  end
  if ARGV[8] then
    local seen = redis.call('HMGET', KEYS[1], 'generation', 'arrivals')
    return 'DRY:' .. (seen[1] or '') .. ':' .. (seen[2] or '0')
  end
  refused = 'SOLD_OUT'
end
redis.call('HSET', KEYS[1], field, '#' .. window_end .. ':' .. (count + 1))
return refused
