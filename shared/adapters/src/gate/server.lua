-- Joined before the scripts that write a sent record (gate/sent.rs): what the caller waits for
-- before it relies on the write, `<replicas>:<replication id>`. The replicas connected now (a
-- `WAIT` for all of them: whichever is promoted holds the write), and the server's replication id,
-- which a promoted replica does not share, so a caller whose `WAIT` went to another server than
-- its write (a failover between them) knows it.
local function server()
  local info = redis.call('INFO', 'replication')
  return (string.match(info, 'connected_slaves:(%d+)') or '0') .. ':' .. (string.match(info, 'master_replid:(%x+)') or '')
end
