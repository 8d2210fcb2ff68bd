-- An order recorded in its bucket's sent record before its message is sent (docs/DESIGN.md section
-- 10): only in the generation of the bucket that decided it, and only while no rebuild has stopped
-- the record since that generation began. A rebuild stops every record before it reads them, so an
-- order is either read by it, or refused here and never sent.
--
-- KEYS[1]  the bucket's sent record (keys::sent), on another shard than the bucket
-- ARGV[1]  the generation of the bucket whose outbox holds the order
-- ARGV[2]  the order id
-- ARGV[3]  the order message, as it will be sent
-- Returns one string:
--   KEPT:<most>:<replicas>:<server> (recorded; the most replicas this server has had connected
--   while it held the record, the replicas it has now, which the caller waits for, and the server's
--   replication id, which names it: a promoted replica has another) |
--   MOVED_ON (a rebuild stopped the record, or laid the bucket down since that generation) |
--   LOST (the record is not laid down: it was lost, or laid before the release that made it; it is
--   repaired from the bucket's outbox, then asked again)

if #ARGV ~= 3 then
  return redis.error_reply('ERR keep_sent: expected generation, order id, message')
end
local record = redis.call('HMGET', KEYS[1], '@open', '@laid')
if record[1] == ARGV[1] then
  redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
  -- The most replicas this server has had connected while it held the record (`@replicas`, with
  -- its replication id: a failover starts again from the promoted server's own). Fewer connected
  -- now is a replica gone that holds the record's earlier orders but not this one, and may yet be
  -- promoted: the caller does not take the order as confirmed until it is back.
  local now = server()
  local connected, id = string.match(now, '^(%d+):(.*)$')
  connected = tonumber(connected)
  local most = 0
  local seen = redis.call('HGET', KEYS[1], '@replicas')
  if seen then
    local n, seen_id = string.match(seen, '^(%d+):(.*)$')
    if seen_id == id then
      most = tonumber(n)
    end
  end
  if connected > most or not seen or most == 0 and seen ~= now then
    redis.call('HSET', KEYS[1], '@replicas', now)
  end
  if connected > most then
    most = connected
  end
  return 'KEPT:' .. most .. ':' .. now
end
if not record[2] then
  return 'LOST'
end
return 'MOVED_ON'
