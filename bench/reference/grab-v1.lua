-- The grab gate: one atomic round trip that decides a grab (docs/DESIGN.md section 6).
--
-- KEYS[1]  ev:{E}:meta     hash: capacity, start (ms), end (ms), state
-- KEYS[2]  ev:{E}:seats    list: the free ticket numbers
-- KEYS[3]  ev:{E}:buyers   hash: user id -> "<order id>:<ticket no>"
-- KEYS[4]  ev:{E}:outbox   sorted set: order message, scored by creation time (ms)
-- KEYS[5]  ev:{E}:rl:<u>   string: the user's request counter in the current window
-- ARGV[1]  user id
-- ARGV[2]  order id (UUIDv7, made by the caller; used only on OK)
-- ARGV[3]  the order message as a JSON object without its closing brace; the script appends
--          `,"ticket_no":<n>}` (string splicing: decoding and re-encoding JSON here would cost
--          more than every other step together)
-- ARGV[4]  rate limit: requests allowed per window
-- ARGV[5]  rate window in milliseconds
-- Returns:
--   {"RATE_LIMITED", <ms until the window resets>}
--   {"NOT_FOUND"} | {"NOT_STARTED"} | {"ENDED"} | {"SOLD_OUT"}
--   {"ALREADY", <order id>, <ticket no>}
--   {"OK", <order id>, <ticket no>, <stock left>}
--   (the outbox entry is ARGV[3] .. ',"ticket_no":<n>}'; the caller rebuilds it rather than
--   having 200 bytes shipped back)
--
-- Everything is validated before the first write, so an error can never leave half a grab.

local user, order_id, message_head = ARGV[1], ARGV[2], ARGV[3]
local limit, window = tonumber(ARGV[4]), tonumber(ARGV[5])
if user == nil or user == '' or order_id == nil or order_id == '' then
  return redis.error_reply('ERR grab: user id and order id are required')
end
if limit == nil or limit < 1 or window == nil or window < 1 then
  return redis.error_reply('ERR grab: rate limit and window must be positive numbers')
end
if message_head == nil or string.sub(message_head, 1, 1) ~= '{' or string.sub(message_head, -1) == '}' then
  return redis.error_reply('ERR grab: the order message must be a JSON object without its closing brace')
end

-- 1. rate limit (the counter is the only write a refused grab makes). INCR + PEXPIRE measured
--    cheaper than SET NX PX + INCR (gate-bench).
local count = redis.call('INCR', KEYS[5])
if count == 1 then
  redis.call('PEXPIRE', KEYS[5], window)
end
if count > limit then
  local ttl = redis.call('PTTL', KEYS[5])
  if ttl < 0 then
    -- a counter without expiry would block the user for ever: give it its window back
    redis.call('PEXPIRE', KEYS[5], window)
    ttl = window
  end
  return {'RATE_LIMITED', ttl}
end

-- 2. the event (missing: unknown, or the cache was lost and must be rebuilt)
local meta = redis.call('HMGET', KEYS[1], 'start', 'end', 'state')
local start_ms, end_ms, state = tonumber(meta[1]), tonumber(meta[2]), meta[3]
if start_ms == nil or end_ms == nil then
  return {'NOT_FOUND'}
end

-- 3. the sale window, on the server's clock
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now_ms < start_ms then
  return {'NOT_STARTED'}
end
if now_ms >= end_ms or state == 'closed' then
  return {'ENDED'}
end

-- 4. one ticket per user: a retry gets the order it already has
local held = redis.call('HGET', KEYS[3], user)
if held then
  local sep = string.find(held, ':', 1, true)
  return {'ALREADY', string.sub(held, 1, sep - 1), tonumber(string.sub(held, sep + 1))}
end

-- 5. stock
local ticket = redis.call('LPOP', KEYS[2])
if not ticket then
  return {'SOLD_OUT'}
end

-- 6. the grab itself
ticket = tonumber(ticket)
redis.call('HSET', KEYS[3], user, order_id .. ':' .. ticket)
redis.call('ZADD', KEYS[4], now_ms, message_head .. ',"ticket_no":' .. ticket .. '}')
return {'OK', order_id, ticket, redis.call('LLEN', KEYS[2])}
