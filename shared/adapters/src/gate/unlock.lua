-- Releases a lock only if the caller still holds it (another holder's lock is left alone).
--
-- KEYS[1]  the lock key
-- ARGV[1]  the caller's token
-- Returns: 1 when released, 0 when the lock was not the caller's (expired or taken over)
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
