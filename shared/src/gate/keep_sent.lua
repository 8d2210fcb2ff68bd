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
--   KEPT:<replicas>:<server> (recorded; the replicas the server has, which the caller waits for,
--   and the server's replication id, which names it: a promoted replica has another) |
--   MOVED_ON (a rebuild stopped the record, or laid the bucket down since that generation) |
--   LOST (the record is not laid down: it was lost, or laid before the release that made it; it is
--   repaired from the bucket's outbox, then asked again)

if #ARGV ~= 3 then
  return redis.error_reply('ERR keep_sent: expected generation, order id, message')
end
local record = redis.call('HMGET', KEYS[1], '@open', '@laid')
if record[1] == ARGV[1] then
  redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
  return 'KEPT:' .. server()
end
if not record[2] then
  return 'LOST'
end
return 'MOVED_ON'
