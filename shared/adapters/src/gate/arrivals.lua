-- A sharded grab's look (gate/grab.rs, `look_sharded`; docs/DESIGN.md section 6, "Sold out"): one
-- bucket's lay-down and how many times numbers went on sale in it since, in one step, only if the
-- bucket is cached in the caller's history (a count read from a cache that may lack the last
-- writes, or one laid down afresh, proves nothing).
--
-- KEYS[1]  ev:{B}:meta
-- ARGV[1]  the opening field of the caller's history (grab.lua's ARGV[7])
-- Returns "<generation>:<arrivals>", or "" when the bucket is not cached in this history.

local m = redis.call('HMGET', KEYS[1], opening, 'generation', 'arrivals')
if not m[1] then
  return ''
end
return (m[2] or '') .. ':' .. (m[3] or '0')
