-- The preamble of every script that reads an event's cache, joined before it at build time
-- (gate/mod.rs, cache_script!, which first sets `opening` to the script's argument that carries the
-- opening field). docs/DESIGN.md section 6.

-- The opening field of the caller's history: given whole, or in cluster mode, where the caller
-- cannot know the node, ending in '@' and completed with the node's own id (a promoted replica is
-- another node, so another history). A call without it is refused by the script's own check.
if opening and string.byte(opening, -1) == 64 then
  opening = opening .. string.sub(redis.call('CLUSTER', 'MYID'), 1, 12)
end

-- Why an event's meta lacks the opening field: NOT_FOUND (no cache), or STALE (a cache written by
-- another history or layout, which may lack the last writes: rebuild it from DynamoDB first).
local function uncached(meta)
  if redis.call('EXISTS', meta) == 1 then
    return 'STALE'
  end
  return 'NOT_FOUND'
end

