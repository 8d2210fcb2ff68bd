-- The grab gate: one atomic round trip that decides a grab (DESIGN.md section 6).
--
-- KEYS[1]  ev:{E}:meta     hash: capacity, start, end (ms), state; and one field per user who has
--                          touched the sale, "=<user>": "<order id>:<ticket no>" (holds an order)
--                          or "#<window start ms>:<count>" (refused requests in the rate window)
-- KEYS[2]  ev:{E}:seats    list: the free ticket numbers
-- KEYS[3]  ev:{E}:outbox   hash: order id -> order message
-- ARGV[1]  user id
-- ARGV[2]  order id (UUIDv7, made by the caller; used only on OK)
-- ARGV[3]  the order message, a JSON object without its closing brace; the script appends
--          ,"ticket_no":<n>} (splicing: decoding and re-encoding JSON would cost more than the rest)
-- ARGV[4]  rate limit: refused requests allowed per window
-- ARGV[5]  rate window (ms)
-- ARGV[6]  the caller's clock (epoch ms)
-- Returns one string:
--   OK:<ticket no> | ALREADY:<order id>:<ticket no> | RATE_LIMITED:<ms until the window ends> |
--   NOT_FOUND | NOT_STARTED | ENDED | SOLD_OUT
--
-- Costs are mostly Lua's own (section 6.1): four redis.call on an OK grab (HMGET, LPOP, HSET meta,
-- HSET outbox), one table read, one string back. A refusal writes only the user's counter.
-- Everything is read and checked before the first write, so an error cannot leave half a grab.

if #ARGV ~= 6 then
  return redis.error_reply('ERR grab: expected 6 arguments (user, order, message head, limit, window, clock)')
end
local field = '=' .. ARGV[1]
local m = redis.call('HMGET', KEYS[1], 'start', 'end', 'state', field)
local start_ms = tonumber(m[1])
if not start_ms then
  return 'NOT_FOUND'
end

-- One ticket per user: a retry gets the order it already has, whatever the counter says.
local held = m[4]
local window_start, count = 0, 0
if held then
  if string.byte(held, 1) ~= 35 then -- not '#': an order
    return 'ALREADY:' .. held
  end
  local sep = string.find(held, ':', 2, true)
  window_start, count = tonumber(string.sub(held, 2, sep - 1)), tonumber(string.sub(held, sep + 1))
end

-- Rate limit: refused requests in the current fixed window, on the caller's clock.
local now = tonumber(ARGV[6])
local window = tonumber(ARGV[5])
if now - window_start >= window then
  window_start, count = now, 0
elseif count >= tonumber(ARGV[4]) then
  return 'RATE_LIMITED:' .. (window_start + window - now)
end

-- The sale window. The caller's clock decides only when both boundaries are more than 10 s away;
-- near one, Redis's TIME does, so the opening and closing seconds are decided on one clock.
local end_ms = tonumber(m[2])
if (now - start_ms < 10000 and start_ms - now < 10000) or (now - end_ms < 10000 and end_ms - now < 10000) then
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
end
local refused
if now < start_ms then
  refused = 'NOT_STARTED'
elseif now >= end_ms or m[3] == 'closed' then
  refused = 'ENDED'
else
  local n = redis.call('LPOP', KEYS[2])
  if n then
    redis.call('HSET', KEYS[1], field, ARGV[2] .. ':' .. n)
    redis.call('HSET', KEYS[3], ARGV[2], ARGV[3] .. ',"ticket_no":' .. n .. '}')
    return 'OK:' .. n
  end
  refused = 'SOLD_OUT'
end
redis.call('HSET', KEYS[1], field, '#' .. window_start .. ':' .. (count + 1))
return refused
