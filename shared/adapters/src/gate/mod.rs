//! The Redis gate (ElastiCache): the scripts that decide, and the typed reads and writes around
//! them, one room per concern (docs/DESIGN.md section 6):
//!
//! - [`keys`]: every key of an event and what its fields mean (the layout, written once);
//! - `grab`: the grab script and its outcome; `admit`: the consumer's question before it stores;
//! - `outbox`: orders decided but not yet stored; `sent`: their records on another shard, kept
//!   before each is sent; `stock`: what the cache says of a sale;
//! - `cache`: warming, the exact rebuild and its lock; `give_back`: giving a number back;
//!   `waitlist`: joining, places, closing; `draw`: a ballot's draw laid down; `limits`: the
//!   per-user request counters;
//! - `buckets`: a sharded event's buckets; `moves`: the numbers that move between them (a late
//!   order's claim among them, taken in by `admit`); `handing`: a sharded event's numbers handed
//!   to its waitlist's line at bucket 0;
//! - `tally`: the grab outcomes each environment counts; `live`: what the organiser's page reads;
//! - `sold_out`: refusals without the script once an event is sold out, read on a replica;
//! - `link`: the connection, and the history (primary or node) it serves.
//!
//! Every script that reads an event's cache begins with `preamble.lua` (the opening field and the
//! `NOT_FOUND`/`STALE` answer), joined to it at build time, so each script's SHA is fixed per build.

use std::sync::LazyLock;

mod admit;
mod buckets;
mod cache;
mod draw;
mod give_back;
mod grab;
mod handing;
pub mod keys;
mod limits;
mod link;
mod live;
mod moves;
mod outbox;
mod sent;
mod sold_out;
pub use sold_out::SOLD_OUT_MEMORY_SPREAD;
mod stock;
mod tally;
mod waitlist;
pub use admit::{ADMIT_SOURCE, Admitted};
pub use buckets::{MOVE_SETTLE_AGE, NO_MASTER};
pub use cache::{LaidDown, RebuildLock, Stopped};
pub use draw::{DrawLaid, DrawWaiter, DrawWinner};
pub use give_back::{GaveBack, GiveBack};
pub use grab::{GRAB_SOURCE, GrabAttempt, GrabOutcome, Grabbed};
pub use handing::{HAND_SOURCE, LET_GO_SOURCE, PROMOTE_SOURCE};
pub use link::Connection;
use link::{Link, LinkConn};
pub use live::{GrabCounts, SaleNow};
pub use moves::{MOVE_IN_SOURCE, MOVE_MOST, MOVE_OUT_SOURCE};
pub use outbox::{HeldNow, OutboxEntry};
pub use sent::{Kept, SENT_KEPT_STORED};
pub use stock::Window;
pub use tally::GrabTally;
pub use waitlist::{InLine, Join, WAIT_SOURCE, WaitlistPlace, Waitlisted};

use crate::config::GateSettings;
use domain::{EventId, Holding};

/// A script that reads an event's cache: `opening` set to its argument that carries the opening
/// field, then `preamble.lua`, then its own source, joined at build time.
macro_rules! cache_script {
    ($file:literal, opening = ARGV[$n:literal]) => {
        concat!("local opening = ARGV[", $n, "]\n", include_str!("preamble.lua"), include_str!($file))
    };
    // With `lasting.lua` too: a script that may create a key of the cache again.
    ($file:literal, opening = ARGV[$n:literal], lasting) => {
        concat!(
            "local opening = ARGV[",
            $n,
            "]\n",
            include_str!("preamble.lua"),
            include_str!("lasting.lua"),
            include_str!($file)
        )
    };
}
use cache_script;

/// In cluster mode, the opening field of the node that serves the key it is given (`keys::opening`
/// of its `CLUSTER MYID`; ARGV[1] is [`keys::opening_prefix`]), routed by that key like any command
/// of the event.
static NODE_OPENING_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new("return ARGV[1] .. string.sub(redis.call('CLUSTER', 'MYID'), 1, 12)"));

/// How far from the sale's boundaries the caller's clock decides the window (docs/DESIGN.md section 6);
/// nearer, Redis's own clock does. Lambda clocks are NTP-synchronised to milliseconds.
pub const CLOCK_TRUST: std::time::Duration = std::time::Duration::from_secs(10);

/// How long an event's cache outlives its sale: long enough for the orders still on the queue to
/// be stored (a user's `PENDING` order is read from it meanwhile), then Redis forgets the event.
/// The outbox has no expiry: a hash disappears by itself once its last entry is removed.
pub const CACHE_AFTER_END: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("unexpected reply from redis: {0}")]
    Protocol(String),
    /// The endpoint leads to a replica (a failover under way): nothing is read or written there.
    #[error("redis endpoint leads to a replica")]
    NotPrimary,
    /// The event's cache was written by another primary (before a failover) and is not rebuilt yet.
    #[error("the event's cache predates a failover")]
    Stale,
    /// A sharded grab's home kept running dry while numbers moved to it from its siblings: not
    /// decided (the user may try again).
    #[error("a sharded grab's home kept running dry")]
    Contended,
}

/// The server a grab was written on: [`Gate::replicated`] asks how many of its replicas have it.
#[derive(Clone)]
pub struct Written {
    conn: LinkConn,
    /// The event's meta key: in cluster mode it names the node that holds the write.
    key: String,
}

#[derive(Clone)]
pub struct Gate {
    link: Link,
    replica_wait: std::time::Duration,
    /// Where a refusal reads a user's field once the event is sold out (`sold_out`).
    reader: std::sync::Arc<sold_out::Reader>,
    sold_out: std::sync::Arc<sold_out::SoldOutMemory>,
    sold_out_memory: std::time::Duration,
    /// The events' bucket counts this environment has read.
    buckets: std::sync::Arc<buckets::BucketBook>,
    /// The `WAIT`s that confirm orders kept in their sent records, shared by the orders kept at once.
    sent_waits: std::sync::Arc<sent::SentWaits>,
}

impl Gate {
    /// Builds the gate without connecting: a cold start never fails because Redis is down; the
    /// first command fails fast instead and the caller answers `503 BUSY`.
    pub fn new(settings: &GateSettings) -> Result<Self, GateError> {
        let link = if settings.cluster {
            Link::cluster(cluster_client(&settings.redis_url, settings, None)?)
        } else {
            let client = redis::Client::open(with_token(&settings.redis_url, settings.auth_token.as_deref())?)?;
            Link::primary(client, settings.connect_timeout, settings.command_timeout)
        };
        let reader = match &settings.reader_url {
            None => sold_out::Reader::Primary,
            // The slot's replicas: the cluster client sends READONLY to them and routes reads there.
            Some(url) if settings.cluster => {
                let client = cluster_client(url, settings, Some(redis::cluster_read_routing::RandomReplicaStrategy))?;
                sold_out::Reader::Cluster(Box::new(sold_out::ReplicaReads::new(client, settings.reader_refresh)))
            }
            Some(url) => {
                let client = redis::Client::open(with_token(url, settings.auth_token.as_deref())?)?;
                let config = redis::aio::ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(settings.connect_timeout))
                    .set_response_timeout(Some(settings.command_timeout));
                sold_out::Reader::Single(Box::new(sold_out::SingleRead::new(client, config)?))
            }
        };
        Ok(Self {
            link,
            replica_wait: settings.replica_wait,
            reader: std::sync::Arc::new(reader),
            sold_out: std::sync::Arc::default(),
            sold_out_memory: settings.sold_out_memory,
            buckets: std::sync::Arc::default(),
            sent_waits: std::sync::Arc::default(),
        })
    }

    /// Connects now (the bound connection a first command would make; on a cluster, the slot map
    /// and every master): a provisioned environment's init calls it.
    pub async fn connect(&self) -> Result<(), GateError> {
        self.link.conn().await.map(drop)
    }

    /// Connects the sold-out memory's reader now (a provisioned grab environment's init), where
    /// the deployment names one.
    pub async fn connect_reader(&self) -> Result<(), GateError> {
        self.reader.connect().await
    }

    /// A connection of its own, for tests and tools that inspect the keys (not bound to a history;
    /// it reconnects by itself).
    pub async fn connection(&self) -> Result<Connection, GateError> {
        self.link.inspection().await
    }

    /// The meta field that says `event` is cached in the current history (docs/DESIGN.md section 6).
    pub async fn opening(&self, event: &EventId) -> Result<String, GateError> {
        let mut conn = self.link.conn().await?;
        opening_on(&mut conn, event).await
    }

    /// Where `user`'s orders of `event` are written: their home bucket, on the current connection
    /// (an order delivered again names it).
    pub async fn written_at_home(&self, event: &EventId, user: &domain::UserId) -> Result<Written, GateError> {
        let buckets = self.buckets(event).await?;
        Ok(Written { conn: self.link.conn().await?, key: keys::meta(buckets.home(user)) })
    }

    /// How many replicas hold what `written`'s connection wrote, waiting up to the configured
    /// time for one (`WAIT` counts the writes of the connection it is sent on, so it goes on
    /// that one). 0 at once when the server has no replica: `WAIT` holds its connection, and
    /// everything queued behind it, for the whole timeout.
    pub async fn replicated(&self, written: &Written) -> Result<u32, GateError> {
        let mut conn = written.conn.clone();
        let info: String = conn.on_node_of(&written.key, redis::cmd("INFO").arg("replication")).await?;
        if link::replicas(&info) == 0 {
            return Ok(0);
        }
        let timeout = self.replica_wait.as_millis().max(1) as u64;
        conn.on_node_of(&written.key, redis::cmd("WAIT").arg(1).arg(timeout)).await
    }
}

/// The opening field of `event` on the server `conn` leads to: from the connection's history, or in
/// cluster mode from the node that serves the event's slot.
async fn opening_on(conn: &mut LinkConn, event: &impl keys::HashTag) -> Result<String, GateError> {
    match conn.history() {
        Some(history) => Ok(keys::opening(history)),
        None => Ok(NODE_OPENING_SCRIPT.key(keys::meta(event)).arg(keys::opening_prefix()).invoke_async(conn).await?),
    }
}

/// How long sent data may go unacknowledged on a cluster connection before the kernel gives the
/// connection up: a master merely busy still acknowledges at once (its kernel does), so only a
/// path gone silent reaches it.
pub(crate) const UNACKED_FOR: std::time::Duration = std::time::Duration::from_secs(5);

/// A cluster client on the configuration endpoint (a name that leads to every node), or nodes
/// listed with commas: it finds the cluster again from them after a node is lost. A connection
/// whose sent data goes unacknowledged for [`UNACKED_FOR`] is given up by the kernel
/// (`TCP_USER_TIMEOUT`), so a node's connection gone silent fails as a lost connection, which the
/// cluster client makes again, rather than timing out every command until the kernel's own
/// retransmissions end (about 15 minutes). Reads go to the
/// slots' primaries, or where `reads` routes them.
fn cluster_client(
    urls: &str,
    settings: &GateSettings,
    reads: Option<redis::cluster_read_routing::RandomReplicaStrategy>,
) -> Result<redis::cluster::ClusterClient, GateError> {
    let mut builder = redis::cluster::ClusterClient::builder(urls.split(',').map(str::trim));
    if let Some(strategy) = reads {
        builder = builder.read_routing_strategy(strategy);
    }
    if let Some(token) = &settings.auth_token {
        builder = builder.password(token.clone());
    }
    Ok(builder
        .connection_timeout(settings.connect_timeout)
        .response_timeout(settings.command_timeout)
        .tcp_settings(redis::io::tcp::TcpSettings::default().set_user_timeout(UNACKED_FOR))
        // One quick retry (a moved slot, a reconnect), no retry storm against a cluster in trouble.
        .retries(1)
        .build()?)
}

/// A server's address with the AUTH token the cache requires (the URL itself carries none).
pub fn with_token(url: &str, token: Option<&str>) -> Result<redis::ConnectionInfo, GateError> {
    let info = redis::IntoConnectionInfo::into_connection_info(url)?;
    Ok(match token {
        Some(token) => {
            let redis = info.redis_settings().clone().set_password(token);
            info.set_redis_settings(redis)
        }
        None => info,
    })
}

/// The opening field a script is given: the whole field where the connection knows its history, the
/// prefix in cluster mode (the script completes it with its node's id).
fn opening_arg(conn: &LinkConn) -> String {
    conn.history().map(keys::opening).unwrap_or_else(keys::opening_prefix)
}

/// Epoch milliseconds as the grab script compares them: zero-padded to 15 digits, so string order is
/// time order for every RFC 3339 year (the script never parses a number on an OK grab).
fn script_time(ms: i64) -> String {
    format!("{:015}", ms.max(0))
}

/// A user's field read as the order they hold (`keys::holding`).
fn split_holding(held: &str) -> Result<Holding, GateError> {
    keys::parse_holding(held).ok_or_else(|| GateError::Protocol(format!("holding {held:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_times_sort_as_strings_as_they_do_as_numbers() {
        let times = [0, 999, 1_000, 1_763_900_000_000, 9_999_999_999_999, 10_413_792_000_000, 253_402_300_799_999];
        for pair in times.windows(2) {
            let (a, b) = (script_time(pair[0]), script_time(pair[1]));
            assert_eq!(a.len(), 15);
            assert!(a < b, "{a} < {b}");
        }
    }
}
