//! The gate's connection to the Redis primary, and the history that primary serves.
//!
//! Replication is asynchronous: a replica promoted by a failover may miss the last writes the old
//! primary acknowledged. Redis says when that can have happened: a promoted replica starts a new
//! replication id, and a primary keeps its id as long as it stays primary. So each connection
//! reads the id once, when it is made (`INFO replication`), and the event caches record the id
//! they were written under (DESIGN.md section 6); a cache written under another id reads as lost
//! and is rebuilt exactly (section 10). The check costs the grab nothing: the id is part of a
//! field name the script reads anyway.
//!
//! A replica is never bound: its id would change under the open connection when it is promoted.
//! A connection that fails (dropped, timed out, or answering `READONLY` because its server was
//! demoted) is forgotten and the next command makes a new one, reading the id again.

use std::sync::Arc;

use redis::{
    AsyncConnectionConfig, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, ServerErrorKind, Value,
    aio::{ConnectionLike, MultiplexedConnection},
};
use tokio::sync::Mutex;

use super::GateError;

/// One connection to a primary, with the replication id it was made under.
struct Bound {
    conn: MultiplexedConnection,
    history: Arc<str>,
}

#[derive(Clone)]
pub(crate) struct Link {
    client: redis::Client,
    config: AsyncConnectionConfig,
    /// Held while a connection is made, so a burst of requests makes one, not one each.
    current: Arc<Mutex<Option<Arc<Bound>>>>,
}

impl Link {
    pub fn new(client: redis::Client, config: AsyncConnectionConfig) -> Self {
        Self { client, config, current: Arc::default() }
    }

    pub fn client(&self) -> &redis::Client {
        &self.client
    }

    /// The current connection, made (and its history read) when there is none.
    pub async fn conn(&self) -> Result<LinkConn, GateError> {
        let mut current = self.current.lock().await;
        if let Some(bound) = current.as_ref() {
            return Ok(LinkConn { bound: bound.clone(), link: self.clone() });
        }
        let mut conn = self.client.get_multiplexed_async_connection_with_config(&self.config).await?;
        let info: String = redis::cmd("INFO").arg("replication").query_async(&mut conn).await?;
        let history = primary_history(&info)?;
        let bound = Arc::new(Bound { conn, history: history.into() });
        *current = Some(bound.clone());
        Ok(LinkConn { bound, link: self.clone() })
    }

    async fn forget(&self, bound: &Arc<Bound>) {
        let mut current = self.current.lock().await;
        if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, bound)) {
            *current = None;
        }
    }
}

/// A command channel on one bound connection: what it sends goes to the server whose history
/// [`LinkConn::history`] names, or fails.
#[derive(Clone)]
pub(crate) struct LinkConn {
    bound: Arc<Bound>,
    link: Link,
}

impl LinkConn {
    /// The replication id of the server this connection talks to.
    pub fn history(&self) -> &str {
        &self.bound.history
    }

    async fn check<T>(&self, result: redis::RedisResult<T>) -> redis::RedisResult<T> {
        if let Err(e) = &result
            && ends_connection(e)
        {
            self.link.forget(&self.bound).await;
        }
        result
    }
}

impl ConnectionLike for LinkConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let result = self.bound.conn.clone().req_packed_command(cmd).await;
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
            let result = self.bound.conn.clone().req_packed_commands(pipeline, offset, count).await;
            self.check(result).await
        })
    }

    fn get_db(&self) -> i64 {
        self.bound.conn.get_db()
    }
}

/// Whether an error means the connection may now lead somewhere else (or nowhere).
fn ends_connection(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_unrecoverable_error()
        || e.is_timeout()
        || e.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly)
}

/// A field of `INFO`'s `name:value` lines.
fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
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
        Some(id) if !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric()) => Ok(id.to_owned()),
        _ => Err(GateError::Protocol("INFO replication names no replication id".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_primary_gives_its_replication_id_and_a_replica_is_refused() {
        let primary =
            "# Replication\r\nrole:master\r\nconnected_slaves:1\r\nmaster_replid:8a1f0c\r\nmaster_replid2:0000\r\n";
        assert_eq!(primary_history(primary).unwrap(), "8a1f0c");
        assert_eq!(replicas(primary), 1);
        let replica = "# Replication\r\nrole:slave\r\nmaster_host:10.0.0.1\r\nmaster_replid:8a1f0c\r\n";
        assert!(matches!(primary_history(replica), Err(GateError::NotPrimary)));
        assert!(primary_history("# Replication\r\nrole:master\r\n").is_err());
        assert!(primary_history("").is_err());
        assert_eq!(replicas(""), 0);
    }
}
