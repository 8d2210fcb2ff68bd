-- Joined after the preamble to the scripts that may create a key of the event's cache again (not
-- to grab.lua, whose instructions are a measured target): such a key lives as long as the cache
-- (meta's expiry), or it would outlive the event.
local function lasting(meta, key)
  if redis.call('PTTL', key) == -1 then
    local forget_at = redis.call('PEXPIRETIME', meta)
    if forget_at > 0 then
      redis.call('PEXPIREAT', key, forget_at)
    end
  end
end

