-- A bucket's sent record laid down (docs/DESIGN.md section 10): taking the orders of the bucket's
-- generation ARGV[2] from here on, with the orders given (those of its outbox that may be on the
-- queue) added to the ones it holds.
--
-- KEYS[1]  the bucket's sent record (keys::sent)
-- ARGV[1]  how: "warm" (a released event's first lay-down: laid whatever it held), "repair" (a
--          record found lost while its bucket is intact: laid only if still not laid and no rebuild
--          has it stopped), or a rebuild's token (laid only if that rebuild stopped it last)
-- ARGV[2]  the generation whose orders it takes
-- ARGV[3]  when it expires (epoch ms), with the event's cache
-- ARGV[4 ..] pairs: order id, order message
-- Returns LAID:<replicas>:<server> (server.lua) | FENCED (another rebuild stopped it since, or it
-- was laid meanwhile: nothing done)

local how = ARGV[1]
local record = redis.call('HMGET', KEYS[1], '@laid', '@stop')
if how == 'warm' then
  redis.call('DEL', KEYS[1])
elseif how == 'repair' then
  if record[1] or record[2] then
    return 'FENCED'
  end
elseif record[2] ~= how then
  return 'FENCED'
end
for i = 4, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('HSET', KEYS[1], '@laid', '1', '@open', ARGV[2])
redis.call('HDEL', KEYS[1], '@stop')
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
return 'LAID:' .. server()
