-- The consumer's mark on a sent record's entry once DynamoDB holds its order (gate/sent.rs): the
-- entry stays, marked `S<ms>|<message>`, until reconcile removes it a while later. A rebuild reads
-- marked entries as any other: an order stored a moment ago may not show in DynamoDB's index yet
-- (it updates eventually), and its record still names its user and number meanwhile.
--
-- KEYS[1]  the bucket's sent record (keys::sent)
-- ARGV[1]  the order id
-- ARGV[2]  now (epoch ms)
-- Returns 1.

local entry = redis.call('HGET', KEYS[1], ARGV[1])
if entry and string.byte(entry, 1) ~= 83 then -- not marked yet ('S')
  redis.call('HSET', KEYS[1], ARGV[1], 'S' .. ARGV[2] .. '|' .. entry)
end
return 1
