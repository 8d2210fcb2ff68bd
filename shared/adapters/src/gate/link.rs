//! The gate's connection to the Redis primary, and the history that primary serves.
//!
//! Replication is asynchronous: a replica promoted by a failover may miss the last writes the old
//! primary acknowledged. Redis says when that can have happened: a promoted replica starts a new
//! replication id, and a primary keeps its id as long as it stays primary. So each connection
//! reads the id once, when it is made (`INFO replication`), and the event caches record the id
//! they were written under (docs/DESIGN.md section 6); a cache written under another id reads as lost
//! and is rebuilt exactly (section 10). The check costs the grab nothing: the id is part of a
//! field name the script reads anyway.
//!
//! A replica is never bound: its id would change under the open connection when it is promoted.
//! A connection that fails (dropped, timed out, or answering `READONLY` because its server was
//! demoted) is forgotten and the next command makes a new one, reading the id again.
//!
//! In cluster mode the redis crate's cluster client routes each command to its slot's primary
//! and follows failovers by itself, so no connection knows its server: there the history is the
//! node's id (`CLUSTER MYID`; a promoted replica is another node), asked by the command itself
//! (the grab script, or a one-line script on the event's key).

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use redis::{
    AsyncConnectionConfig, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, ServerErrorKind, Value,
    aio::{ConnectionLike, MultiplexedConnection},
    cluster::ClusterClient,
    cluster_async::ClusterConnection,
    cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, Slot, SlotAddr},
};
use tokio::sync::Mutex;

use super::GateError;

/// One connection to a primary, with the replication id it was made under.
pub(crate) struct Bound {
    conn: MultiplexedConnection,
    history: Arc<str>,
    answered: Answered,
}

/// The cluster client's connection (one to each node it has met).
pub(crate) struct ClusterBound {
    conn: ClusterConnection,
    answered: Answered,
}

/// When a command last came back on a connection (wall-clock milliseconds: a frozen Lambda
/// environment's monotonic clock may not count the time it was frozen).
struct Answered(AtomicU64);

impl Answered {
    fn now() -> Self {
        Self(AtomicU64::new(wall_ms()))
    }

    fn idle(&self) -> std::time::Duration {
        std::time::Duration::from_millis(wall_ms().saturating_sub(self.0.load(Ordering::Relaxed)))
    }

    fn mark(&self) {
        self.0.store(wall_ms(), Ordering::Relaxed);
    }
}

/// How long a connection may sit unused before it is asked a `PING` ahead of the next command. A
/// Lambda environment frozen between requests keeps its socket, which the server or the network
/// may have closed meanwhile (ElastiCache drops a silent peer; public reports see frozen
/// connections dead after 7-10 minutes): a command sent on it fails, and one whose reply is lost
/// cannot be sent again (it may have run). A `PING` can: it finds the dead connection, a new one
/// is made, and the command goes out once, on a live one. Lambda freezes an environment as soon as
/// its request ends, so every gap between requests is frozen time; a busy environment (10
/// requests a second) never waits this long, an idle one pays one round trip.
const IDLE_PROBE_AFTER: std::time::Duration = std::time::Duration::from_secs(5);

fn wall_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl Bound {
    fn new(conn: MultiplexedConnection, history: Arc<str>) -> Self {
        Self { conn, history, answered: Answered::now() }
    }
}

#[derive(Clone)]
pub(crate) enum Link {
    Primary(Arc<Primary>),
    Cluster(Arc<Cluster>),
}

/// One primary (ElastiCache with cluster mode disabled, or a local redis-server).
pub(crate) struct Primary {
    client: redis::Client,
    config: AsyncConnectionConfig,
    /// The same timeouts for the inspection connection (`Gate::connection`).
    inspection: redis::aio::ConnectionManagerConfig,
    /// Held while a connection is made, so a burst of requests makes one, not one each.
    current: Mutex<Option<Arc<Bound>>>,
}

/// A Redis Cluster, through its configuration endpoint; connected on first use.
pub(crate) struct Cluster {
    client: ClusterClient,
    /// Held while the connection is asked or made, as [`Primary`]'s.
    current: Mutex<Option<Arc<ClusterBound>>>,
}

impl Link {
    pub fn primary(client: redis::Client, connect: std::time::Duration, command: std::time::Duration) -> Self {
        let config =
            AsyncConnectionConfig::new().set_connection_timeout(Some(connect)).set_response_timeout(Some(command));
        let inspection = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(connect))
            .set_response_timeout(Some(command));
        Self::Primary(Arc::new(Primary { client, config, inspection, current: Mutex::default() }))
    }

    pub fn cluster(client: ClusterClient) -> Self {
        Self::Cluster(Arc::new(Cluster { client, current: Mutex::default() }))
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster(_))
    }

    /// The current connection, made (and its history read) when there is none.
    pub async fn conn(&self) -> Result<LinkConn, GateError> {
        match self {
            Self::Primary(primary) => Primary::conn(primary).await,
            Self::Cluster(cluster) => Cluster::conn(cluster).await,
        }
    }
}

/// A connection for tests and tools that read the keys: it reconnects by itself and is bound to no
/// history.
#[derive(Clone)]
pub enum Connection {
    Single(redis::aio::ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(conn) => conn.req_packed_command(cmd),
            Self::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Self::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(conn) => conn.get_db(),
            Self::Cluster(conn) => conn.get_db(),
        }
    }
}

impl Link {
    pub async fn inspection(&self) -> Result<Connection, GateError> {
        Ok(match self {
            Self::Primary(primary) => Connection::Single(redis::aio::ConnectionManager::new_lazy_with_config(
                primary.client.clone(),
                primary.inspection.clone(),
            )?),
            Self::Cluster(cluster) => Connection::Cluster(cluster.client.get_async_connection().await?),
        })
    }
}

impl Primary {
    async fn conn(this: &Arc<Self>) -> Result<LinkConn, GateError> {
        let mut current = this.current.lock().await;
        if let Some(bound) = current.as_ref() {
            // Idle a while (a frozen environment thawing): asked first, under the lock, so a
            // burst of requests asks once. A dead one is replaced before any command meets it.
            if bound.answered.idle() < IDLE_PROBE_AFTER {
                return Ok(LinkConn::Primary { bound: bound.clone(), link: this.clone() });
            }
            let pinged: redis::RedisResult<String> = redis::cmd("PING").query_async(&mut bound.conn.clone()).await;
            if let Err(e) = pinged {
                tracing::warn!(error = %e, idle_ms = bound.answered.idle().as_millis() as u64, "an idle cache connection was dead; a new one is made");
                *current = None;
            } else {
                bound.answered.mark();
                return Ok(LinkConn::Primary { bound: bound.clone(), link: this.clone() });
            }
        }
        let mut conn = this.client.get_multiplexed_async_connection_with_config(&this.config).await?;
        let info: String = redis::cmd("INFO").arg("replication").query_async(&mut conn).await?;
        let history = primary_history(&info)?;
        let bound = Arc::new(Bound::new(conn, history.into()));
        *current = Some(bound.clone());
        Ok(LinkConn::Primary { bound, link: this.clone() })
    }

    async fn forget(&self, bound: &Arc<Bound>) {
        let mut current = self.current.lock().await;
        if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, bound)) {
            *current = None;
        }
    }
}

impl Cluster {
    /// As [`Primary::conn`]: an idle connection is asked first, a `PING` on one primary drawn at
    /// random, and replaced by a new cluster connection when it does not answer. One, not every
    /// primary: what kills a frozen environment's connections (a server's keepalive giving up on
    /// a peer that does not answer, a path's idle timeout) kills each of them alike, since each
    /// stood idle as long, so one answers for all; and a `PING` on every master from each of a
    /// warm fleet's 26,400 environments at the open would cost every master 26,400 `PING`s in its
    /// first second (docs/SCALE.md). A node that failed meanwhile answers its connection with an
    /// error, which the cluster client mends (it reads the slots again); one whose connection went
    /// silent alone (replaced at another address while the environment stood frozen) stops
    /// acknowledging what is sent to it, and the kernel gives that connection up after
    /// [`super::UNACKED_FOR`], an error the cluster client mends the same way. Only idle
    /// ones: a busy environment's never is (a command that times out leaves it to the cluster
    /// client's own mending), and a new one counts as answered, so an environment connects again
    /// at most once per idle spell.
    async fn conn(this: &Arc<Self>) -> Result<LinkConn, GateError> {
        let mut current = this.current.lock().await;
        if let Some(bound) = current.as_ref() {
            if bound.answered.idle() < IDLE_PROBE_AFTER {
                return Ok(LinkConn::Cluster { conn: bound.conn.clone(), bound: bound.clone() });
            }
            let one_primary = RoutingInfo::SingleNode(SingleNodeRoutingInfo::RandomPrimary);
            let pinged = bound.conn.clone().route_command(redis::cmd("PING"), one_primary).await;
            if let Err(e) = pinged {
                tracing::warn!(error = %e, idle_ms = bound.answered.idle().as_millis() as u64, "an idle cache connection was dead; a new one is made");
                *current = None;
            } else {
                bound.answered.mark();
                return Ok(LinkConn::Cluster { conn: bound.conn.clone(), bound: bound.clone() });
            }
        }
        let bound =
            Arc::new(ClusterBound { conn: this.client.get_async_connection().await?, answered: Answered::now() });
        *current = Some(bound.clone());
        Ok(LinkConn::Cluster { conn: bound.conn.clone(), bound })
    }
}

/// A command channel: on one bound connection to a primary (what it sends goes to the server
/// whose history [`LinkConn::history`] names, or fails), or through the cluster client.
#[derive(Clone)]
pub(crate) enum LinkConn {
    Primary { bound: Arc<Bound>, link: Arc<Primary> },
    Cluster { conn: ClusterConnection, bound: Arc<ClusterBound> },
}

impl LinkConn {
    /// The replication id of the primary this connection talks to; `None` in cluster mode, where
    /// each command asks its node.
    pub fn history(&self) -> Option<&str> {
        match self {
            Self::Primary { bound, .. } => Some(&bound.history),
            Self::Cluster { .. } => None,
        }
    }

    /// Which connection this is, as far as a `WAIT` can tell (it counts its own connection's
    /// writes): the bound connection to a primary, or the cluster client's (made again when an
    /// idle one does not answer; within it, a node's connection changes with a failover, which the
    /// server's id tells apart).
    pub fn identity(&self) -> usize {
        match self {
            Self::Primary { bound, .. } => Arc::as_ptr(bound) as usize,
            Self::Cluster { bound, .. } => Arc::as_ptr(bound) as usize,
        }
    }

    /// Sends `cmd` to the primary that serves `key` (a keyless command, like `INFO` or `WAIT`,
    /// would go to every node of a cluster).
    pub async fn on_node_of<T: redis::FromRedisValue>(&mut self, key: &str, cmd: &Cmd) -> Result<T, GateError> {
        Ok(match self {
            Self::Primary { .. } => cmd.query_async(self).await?,
            Self::Cluster { conn, .. } => {
                let route = Route::with_slot(Slot::for_key(key), SlotAddr::Master);
                let reply = conn
                    .route_command(cmd.clone(), RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)))
                    .await?;
                redis::from_redis_value(reply).map_err(RedisError::from)?
            }
        })
    }

    /// Sends `pipe` to the primary that serves `key`, its commands in order on one connection.
    pub async fn pipe_on_node_of<T: redis::FromRedisValue>(
        &mut self,
        key: &str,
        pipe: &Pipeline,
    ) -> Result<T, GateError> {
        Ok(match self {
            Self::Primary { .. } => pipe.query_async(self).await?,
            Self::Cluster { conn, .. } => {
                let route = Route::with_slot(Slot::for_key(key), SlotAddr::Master);
                let replies = conn
                    .route_pipeline(pipe.clone(), 0, pipe.len(), SingleNodeRoutingInfo::SpecificNode(route))
                    .await?;
                // A command's error reply comes back as a value here: an error, as from a connection.
                let replies = Value::Array(replies).extract_error()?;
                redis::from_redis_value(replies).map_err(RedisError::from)?
            }
        })
    }

    async fn check<T>(&self, result: redis::RedisResult<T>) -> redis::RedisResult<T> {
        match (self, &result) {
            (Self::Primary { bound, link }, Err(e)) if ends_connection(e) => link.forget(bound).await,
            // A server's error reply came back on it: the connection is alive.
            (Self::Primary { bound, .. }, _) => bound.answered.mark(),
            // The cluster client mends a node's connection itself; a timeout (a master merely
            // slow) must not make thousands of environments connect again to every master at
            // once. Only an idle connection's `PING` replaces it (`Cluster::conn`).
            (Self::Cluster { .. }, Err(e)) if ends_connection(e) => {}
            (Self::Cluster { bound, .. }, _) => bound.answered.mark(),
        }
        result
    }
}

impl ConnectionLike for LinkConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let result = match self {
                Self::Primary { bound, .. } => bound.conn.clone().req_packed_command(cmd).await,
                Self::Cluster { conn, .. } => conn.req_packed_command(cmd).await,
            };
            self.check(result).await
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let result = match self {
                Self::Primary { bound, .. } => bound.conn.clone().req_packed_commands(pipeline, offset, count).await,
                Self::Cluster { conn, .. } => conn.req_packed_commands(pipeline, offset, count).await,
            };
            self.check(result).await
        })
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Primary { bound, .. } => bound.conn.get_db(),
            Self::Cluster { conn, .. } => conn.get_db(),
        }
    }
}

/// Whether an error means the connection may now lead somewhere else (or nowhere).
fn ends_connection(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_unrecoverable_error()
        || e.is_timeout()
        || e.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly)
}

/// How much of a replication id (40 random hex digits) names a history: 48 bits tell two apart
/// all but once in 10^14, and the grab script hashes a short field name for less (docs/BENCHMARKS.md section 3).
pub(crate) const HISTORY_LEN: usize = 12;

/// A field of `INFO`'s `name:value` lines.
pub(crate) fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines().find_map(|line| line.trim_end().strip_prefix(name).and_then(|rest| rest.strip_prefix(':')))
}

/// How many replicas a primary's `INFO replication` says are connected.
pub(crate) fn replicas(info: &str) -> u32 {
    info_field(info, "connected_slaves").and_then(|n| n.parse().ok()).unwrap_or(0)
}

/// The replication id of a primary, from its `INFO replication`; a replica is refused.
fn primary_history(info: &str) -> Result<String, GateError> {
    let field = |name: &str| info_field(info, name);
    match field("role") {
        Some("master") => {}
        Some(_) => return Err(GateError::NotPrimary),
        None => return Err(GateError::Protocol("INFO replication names no role".into())),
    }
    match field("master_replid") {
        Some(id) if id.len() >= HISTORY_LEN && id.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Ok(id[..HISTORY_LEN].to_owned())
        }
        _ => Err(GateError::Protocol("INFO replication names no replication id".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_primary_gives_its_replication_id_and_a_replica_is_refused() {
        let primary = "# Replication\r\nrole:master\r\nconnected_slaves:1\r\n\
                       master_replid:8a1f0c5d9e2b7a41c3f0e8d6b5a4c3d2e1f0a9b8\r\nmaster_replid2:0000\r\n";
        assert_eq!(primary_history(primary).unwrap(), "8a1f0c5d9e2b", "the first 12 digits name the history");
        assert_eq!(replicas(primary), 1);
        let replica = "# Replication\r\nrole:slave\r\nmaster_host:10.0.0.1\r\nmaster_replid:8a1f0c5d9e2b7a41c3f0e8d6b5a4c3d2e1f0a9b8\r\n";
        assert!(primary_history("role:master\r\nmaster_replid:8a1f0c\r\n").is_err(), "too short to name a history");
        assert!(matches!(primary_history(replica), Err(GateError::NotPrimary)));
        assert!(primary_history("# Replication\r\nrole:master\r\n").is_err());
        assert!(primary_history("").is_err());
        assert_eq!(replicas(""), 0);
    }
}
