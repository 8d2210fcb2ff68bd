//! The sent records: every order that may be on the queue, kept on another shard than the bucket
//! that decided it (docs/DESIGN.md section 10). An order message goes to the queue only once its
//! bucket's sent record holds it, confirmed by every replica of the record's server
//! ([`Gate::keep_sent`]); so when a bucket is lost, outbox and all, the rebuild finds in its sent
//! record every order a user may have been told of, and needs nothing of the queue (whose depth
//! SQS only approximates, and which another sale's backlog may fill for minutes).

use std::{
    collections::HashMap,
    sync::{
        Arc, LazyLock,
        atomic::{AtomicU64, Ordering},
    },
};

use futures::{FutureExt, future::Shared};
use redis::AsyncCommands;

use super::{
    Gate, GateError, RebuildLock, cache_script, keys,
    link::{self, LinkConn},
    opening_arg,
    outbox::OutboxEntry,
};
use domain::{EventId, OrderId, UserId};

/// A script that writes a sent record and says what confirms the write (`server.lua`).
macro_rules! record_script {
    ($file:literal) => {
        concat!(include_str!("server.lua"), include_str!($file))
    };
}

static KEEP_SENT_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(record_script!("keep_sent.lua")));
static LAY_SENT_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(record_script!("lay_sent.lua")));
static STOP_SENT_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(record_script!("stop_sent.lua")));
static WHOLE_OUTBOX_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(cache_script!("whole_outbox.lua", opening = ARGV[1])));
static SENT_STORED_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("sent_stored.lua")));

/// How long a stored order's entry stays in its sent record (marked): far past the lag of
/// DynamoDB's index, so a rebuild never misses an order stored a moment before it read.
pub const SENT_KEPT_STORED: std::time::Duration = std::time::Duration::from_secs(60);

/// A sent record's entry: the order message, or (`S<ms>|<message>`) one whose order DynamoDB
/// holds since then. `None` for a field that is no order's (the record's own `@` fields).
fn sent_entry(key: String, value: String) -> Option<(OutboxEntry, Option<i64>)> {
    let order_id = OrderId::parse(&key).ok()?;
    let (stored, message) = match value.strip_prefix('S').and_then(|v| v.split_once('|')) {
        Some((ms, message)) => (ms.parse().ok(), message.to_owned()),
        None => (None, value),
    };
    Some((OutboxEntry { order_id, message }, stored))
}

/// How long a sent record a rebuild's stop created (the record was lost) lives if no rebuild lays
/// it down: as long as a bucket remembers its stop.
const STOP_KEPT_MS: u64 = 600_000;

/// The server a sent record was written on, as the writing script said (`server.lua`): how many
/// replicas it has, and its replication id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Server {
    replicas: u32,
    id: String,
}

impl Server {
    fn parse(text: &str) -> Result<Self, GateError> {
        let bad = || GateError::Protocol(format!("server {text:?}"));
        let (replicas, id) = text.split_once(':').ok_or_else(bad)?;
        Ok(Self { replicas: replicas.parse().map_err(|_| bad())?, id: id.to_owned() })
    }

    /// The same from the server's `INFO replication` read by the caller, as `server.lua` reads it
    /// in a script: the replicas connected, the replication id (empty when it names none).
    fn from_info(info: &str) -> Self {
        let id = link::info_field(info, "master_replid")
            .map(|v| v.chars().take_while(char::is_ascii_hexdigit).collect())
            .unwrap_or_default();
        Self { replicas: link::replicas(info), id }
    }
}

/// What became of an order asked to be kept in its sent record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// In the sent record, on a server with `replicas` replicas, `confirmed` when every one of
    /// them holds it (`WAIT`, on the connection that wrote it, to the same server) and none it had
    /// while it held the record is gone (that one holds the earlier orders, not this, and may be
    /// promoted); with no replica and none gone, confirmed at once.
    Kept { replicas: u32, confirmed: bool },
    /// Not kept: a rebuild stopped the record or laid the bucket down since the order was decided
    /// without it, or the record could not be laid down again. The order must not be sent now
    /// (the rebuild knows it from the outbox, or it was lost with its bucket before anyone was told
    /// of it); reconcile sends what the outbox still holds.
    Refused,
}

impl Kept {
    /// Whether the order may go to the queue: a copy of it outlives the loss of its bucket (the
    /// record is on another shard) and a failover of the record's own server (every replica has
    /// it, or there is none to promote).
    pub fn may_send(self) -> bool {
        matches!(self, Self::Kept { confirmed: true, .. })
    }

    /// Whether a replica holds it: an order whose send failed is then durable enough to be told
    /// `202` (reconcile sends it again from the outbox, or the rebuild from the record).
    pub fn replicated(self) -> bool {
        matches!(self, Self::Kept { replicas, confirmed: true } if replicas > 0)
    }
}

/// `WAIT`s on the connections that kept orders, shared: one `WAIT` sent after a write confirms every
/// write made on that connection before it, so orders kept at once share one (a rush would otherwise
/// queue one `WAIT` per order behind each other on the multiplexed connection). Shared only by the
/// writes of one connection to one record: a `WAIT` counts its own connection's writes, and a fresh
/// connection's `WAIT` confirms nothing of an older one's.
#[derive(Default)]
pub(super) struct SentWaits {
    /// Counts the writes whose `WAIT` is asked for; a `WAIT` covers every count up to its own.
    written: AtomicU64,
    /// Per connection and record: the `WAIT` under way and the last one answered.
    by_record: std::sync::Mutex<HashMap<(usize, String), WaitState>>,
}

/// The most connection-and-record states [`SentWaits`] keeps before it drops the idle ones.
const MAX_WAIT_STATES: usize = 1_024;

/// A `WAIT`'s answer: how many replicas acknowledged, and the server that answered (its
/// replication id, read after the `WAIT` on the same route).
type Waited = (u32, String);
type SharedWait = Shared<futures::future::BoxFuture<'static, Result<Waited, Arc<GateError>>>>;

#[derive(Default)]
struct WaitState {
    in_flight: Option<(u64, SharedWait)>,
    answered: Option<(u64, Waited)>,
}

impl SentWaits {
    /// Whether every replica of `server` holds the write answered just before this call, on the
    /// connection `conn` leads to for `record`: a `WAIT` sent after that answer on the same
    /// connection, this caller's own or one another caller sent since, answered by the same server.
    async fn confirmed(
        &self,
        conn: &LinkConn,
        record: &str,
        server: &Server,
        timeout_ms: u64,
    ) -> Result<bool, GateError> {
        let mine = self.written.fetch_add(1, Ordering::SeqCst) + 1;
        let key = (conn.identity(), record.to_owned());
        loop {
            let (covers, wait) = {
                let mut all = self.by_record.lock().unwrap_or_else(|p| p.into_inner());
                let state = all.entry(key.clone()).or_default();
                if let Some((covers, waited)) = &state.answered
                    && *covers >= mine
                {
                    return Ok(waited.0 >= server.replicas && waited.1 == server.id);
                }
                match &state.in_flight {
                    Some((covers, wait)) => (*covers, wait.clone()),
                    None => {
                        // Every write counted so far was answered before this `WAIT` is sent.
                        let covers = self.written.load(Ordering::SeqCst);
                        let wait = wait_on(conn.clone(), record.to_owned(), server.replicas, timeout_ms);
                        state.in_flight = Some((covers, wait.clone()));
                        (covers, wait)
                    }
                }
            };
            let waited = wait.await;
            {
                let mut all = self.by_record.lock().unwrap_or_else(|p| p.into_inner());
                // Connections replaced and events gone leave their records' states behind: past a
                // bound, those with no `WAIT` under way go (a caller they would have answered
                // sends a `WAIT` of its own).
                if all.len() >= MAX_WAIT_STATES {
                    all.retain(|_, state| state.in_flight.is_some());
                }
                let state = all.entry(key.clone()).or_default();
                if state.in_flight.as_ref().is_some_and(|(c, _)| *c == covers) {
                    state.in_flight = None;
                }
                if let Ok(waited) = &waited
                    && state.answered.as_ref().is_none_or(|(c, _)| *c < covers)
                {
                    state.answered = Some((covers, waited.clone()));
                }
            }
            // A `WAIT` sent before this caller's write was answered covers it not: the next one does.
            if covers >= mine {
                let (acked, id) = waited.map_err(|e| GateError::Protocol(format!("WAIT: {e}")))?;
                return Ok(acked >= server.replicas && id == server.id);
            }
        }
    }
}

/// `WAIT` for `replicas` on the connection that leads to `record`'s server, then that server's
/// replication id on the same route: one round trip (the `INFO` is read after the `WAIT` is
/// answered, the server taking a blocked client's next command only then), a plain command
/// rather than a script (the primary's core pays for each kept order's: BENCHMARKS section 3).
fn wait_on(mut conn: LinkConn, record: String, replicas: u32, timeout_ms: u64) -> SharedWait {
    async move {
        let mut both = redis::pipe();
        both.cmd("WAIT").arg(replicas).arg(timeout_ms).cmd("INFO").arg("replication");
        let (acked, info): (u32, String) = conn.pipe_on_node_of(&record, &both).await.map_err(Arc::new)?;
        Ok((acked, Server::from_info(&info).id))
    }
    .boxed()
    .shared()
}

impl Gate {
    /// Keeps an order of `event`'s outbox in its bucket's sent record, before it is sent. The
    /// bucket is the user's home; `generation` is its lay-down when the order was decided there
    /// (`None`: read now, with the order still in its outbox). A record found lost is laid down
    /// again from its bucket's outbox while the bucket is intact.
    pub async fn keep_sent(
        &self,
        event: &EventId,
        user: &UserId,
        order: &OrderId,
        message: &str,
        generation: Option<&str>,
    ) -> Result<Kept, GateError> {
        let buckets = self.buckets(event).await?;
        let home = buckets.home(user);
        let record = keys::sent(home);
        let mut conn = self.link.conn().await?;
        let mut generation = generation.map(str::to_owned);
        // A record moved on (a rebuild laid the bucket down again, keeping the order) or repaired
        // is asked again, a few times at most.
        for _ in 0..3 {
            let laid = match generation.take() {
                Some(g) => g,
                None => match self.still_in_outbox(&mut conn, home, order).await? {
                    Some(g) => g,
                    None => return Ok(Kept::Refused),
                },
            };
            let reply: String = KEEP_SENT_SCRIPT
                .key(&record)
                .arg(&laid)
                .arg(order.as_str())
                .arg(message)
                .invoke_async(&mut conn)
                .await?;
            match reply.split_once(':') {
                Some(("KEPT", kept)) => {
                    let (most, server) = kept
                        .split_once(':')
                        .ok_or_else(|| GateError::Protocol(format!("keep_sent reply {reply:?}")))?;
                    let most: u32 =
                        most.parse().map_err(|_| GateError::Protocol(format!("keep_sent reply {reply:?}")))?;
                    let server = Server::parse(server)?;
                    // A replica the record's server had is gone: not confirmed, whatever the rest hold.
                    let confirmed = server.replicas >= most
                        && (server.replicas == 0 || {
                            let timeout = self.replica_wait.as_millis().max(1) as u64;
                            self.sent_waits.confirmed(&conn, &record, &server, timeout).await?
                        });
                    return Ok(Kept::Kept { replicas: server.replicas, confirmed });
                }
                _ if reply == "MOVED_ON" => {}
                _ if reply == "LOST" => {
                    if !self.repair_sent(&mut conn, home).await? {
                        return Ok(Kept::Refused);
                    }
                }
                _ => return Err(GateError::Protocol(format!("keep_sent reply {reply:?}"))),
            }
        }
        Ok(Kept::Refused)
    }

    /// The bucket's generation, if its outbox still holds `order` (one step at the bucket).
    async fn still_in_outbox(
        &self,
        conn: &mut LinkConn,
        home: &keys::Bucket,
        order: &OrderId,
    ) -> Result<Option<String>, GateError> {
        let (generation, present): (Option<String>, bool) = redis::pipe()
            .atomic()
            .hget(keys::meta(home), "generation")
            .hexists(keys::outbox(home), order.as_str())
            .query_async(conn)
            .await?;
        Ok(generation.filter(|_| present))
    }

    /// Whether every replica of `server` holds what `conn` wrote to `record` so far (a rebuild's
    /// stop or lay-down of a record: rare, so not shared).
    async fn record_confirmed(&self, conn: &LinkConn, record: &str, server: &Server) -> Result<bool, GateError> {
        if server.replicas == 0 {
            return Ok(true);
        }
        let timeout = self.replica_wait.as_millis().max(1) as u64;
        let (acked, id) = wait_on(conn.clone(), record.to_owned(), server.replicas, timeout)
            .await
            .map_err(|e| GateError::Protocol(format!("WAIT: {e}")))?;
        Ok(acked >= server.replicas && id == server.id)
    }

    /// Lays a lost sent record down again from its bucket's outbox, only while the bucket is cached
    /// in this history (nothing of its outbox was lost) and no rebuild has the record stopped.
    /// Whether the record is laid down now, and confirmed (by this call or another).
    async fn repair_sent(&self, conn: &mut LinkConn, home: &keys::Bucket) -> Result<bool, GateError> {
        let whole: redis::Value = WHOLE_OUTBOX_SCRIPT
            .key(keys::meta(home))
            .key(keys::outbox(home))
            .arg(opening_arg(conn))
            .invoke_async(conn)
            .await?;
        let Ok(whole) = redis::from_redis_value::<Vec<String>>(whole) else {
            return Ok(false);
        };
        let [generation, expiry, entries @ ..] = whole.as_slice() else {
            // NOT_FOUND or STALE (the bucket not cached in this history): not laid from it.
            if whole.len() == 1 {
                return Ok(false);
            }
            return Err(GateError::Protocol("whole_outbox reply too short".into()));
        };
        let record = keys::sent(home);
        let mut lay = LAY_SENT_SCRIPT.key(&record);
        lay.arg("repair").arg(generation).arg(expiry);
        for entry in entries {
            lay.arg(entry);
        }
        let laid: String = lay.invoke_async(conn).await?;
        tracing::warn!(bucket = %home, laid = %laid, orders = entries.len() / 2, "a lost sent record laid down again from its bucket's outbox");
        match laid.strip_prefix("LAID:") {
            Some(server) => self.record_confirmed(conn, &record, &Server::parse(server)?).await,
            // Laid by another meanwhile, or stopped by a rebuild (which lays it down).
            None => Ok(conn.hexists(&record, keys::SENT_LAID).await?),
        }
    }

    /// A released event's sent records, laid down empty before its buckets (`Gate::warm`), each
    /// confirmed by its server's replicas.
    pub(super) async fn warm_sent(
        &self,
        conn: &mut LinkConn,
        buckets: &keys::Buckets,
        generation: &str,
        expiry_ms: i64,
    ) -> Result<(), GateError> {
        for bucket in buckets.iter() {
            let record = keys::sent(bucket);
            let laid: String =
                LAY_SENT_SCRIPT.key(&record).arg("warm").arg(generation).arg(expiry_ms).invoke_async(conn).await?;
            let server = laid.strip_prefix("LAID:").ok_or_else(|| GateError::Protocol(format!("lay_sent {laid:?}")))?;
            if !self.record_confirmed(conn, &record, &Server::parse(server)?).await? {
                return Err(GateError::Protocol("a replica did not confirm a sent record".into()));
            }
        }
        Ok(())
    }

    /// The rebuild's stop at every sent record, after the buckets stopped, each stop confirmed by
    /// its server's replicas: bucket by bucket, whether its record is laid down (then it holds every
    /// order of its bucket that may be on the queue). `None` when a replica did not confirm a stop
    /// (a record's own failover could undo it: the rebuild tries again).
    pub async fn stop_sent(&self, buckets: &keys::Buckets, lock: &RebuildLock) -> Result<Option<Vec<bool>>, GateError> {
        let conn = self.link.conn().await?;
        let stops = buckets.iter().map(|bucket| {
            let mut conn = conn.clone();
            async move {
                let record = keys::sent(bucket);
                let stopped: String =
                    STOP_SENT_SCRIPT.key(&record).arg(lock.token()).arg(STOP_KEPT_MS).invoke_async(&mut conn).await?;
                let (laid, server) =
                    stopped.split_once(':').ok_or_else(|| GateError::Protocol(format!("stop_sent {stopped:?}")))?;
                let confirmed = self.record_confirmed(&conn, &record, &Server::parse(server)?).await?;
                Ok::<_, GateError>(confirmed.then_some(laid == "LAID"))
            }
        });
        Ok(futures::future::try_join_all(stops).await?.into_iter().collect())
    }

    /// Every order the sent records of these buckets hold, where `wanted` says (the records a
    /// rebuild relies on). `None` when one of those is not as this rebuild stopped it (lost since,
    /// or stopped by another): the rebuild tries again.
    pub async fn sent_of(
        &self,
        buckets: &keys::Buckets,
        wanted: &[bool],
        lock: &RebuildLock,
    ) -> Result<Option<Vec<OutboxEntry>>, GateError> {
        let mut conn = self.link.conn().await?;
        let mut entries = Vec::new();
        for (b, wanted) in buckets.iter().zip(wanted) {
            if !wanted {
                continue;
            }
            let all: HashMap<String, String> = conn.hgetall(keys::sent(b)).await?;
            if all.get(keys::SENT_STOP).map(String::as_str) != Some(lock.token()) || !all.contains_key(keys::SENT_LAID)
            {
                return Ok(None);
            }
            entries.extend(all.into_iter().filter_map(|(key, value)| sent_entry(key, value)).map(|(e, _)| e));
        }
        Ok(Some(entries))
    }

    /// A rebuild lays a bucket's sent record down (before any bucket opens), with the orders of
    /// its outbox as laid: only if this rebuild stopped it last, and confirmed by its server's
    /// replicas. Whether it is.
    pub(super) async fn lay_sent(
        &self,
        conn: &mut LinkConn,
        bucket: &keys::Bucket,
        lock: &RebuildLock,
        expiry_ms: i64,
        orders: &[&OutboxEntry],
    ) -> Result<bool, GateError> {
        let record = keys::sent(bucket);
        let mut lay = LAY_SENT_SCRIPT.key(&record);
        lay.arg(lock.token()).arg(lock.token()).arg(expiry_ms);
        for entry in orders {
            lay.arg(entry.order_id.as_str()).arg(&entry.message);
        }
        let laid: String = lay.invoke_async(conn).await?;
        match laid.strip_prefix("LAID:") {
            Some(server) => self.record_confirmed(conn, &record, &Server::parse(server)?).await,
            None => Ok(false),
        }
    }

    /// Marks an order's entry in its bucket's sent record stored, once DynamoDB holds it (after
    /// its outbox entry left): from its user's home, or for an entry whose user cannot be read, in
    /// every bucket's (`sent_stored.lua`). Reconcile removes it [`SENT_KEPT_STORED`] later.
    pub(super) async fn mark_sent_stored(
        &self,
        conn: &mut LinkConn,
        buckets: &keys::Buckets,
        user: Option<&UserId>,
        order: &OrderId,
    ) -> Result<(), GateError> {
        let now = domain::event::epoch_ms(time::OffsetDateTime::now_utc());
        for b in buckets.iter().filter(|b| user.is_none_or(|u| buckets.home(u) == *b)) {
            let _: i64 = SENT_STORED_SCRIPT.key(keys::sent(b)).arg(order.as_str()).arg(now).invoke_async(conn).await?;
        }
        Ok(())
    }

    /// Removes an order's entry from its sent record (reconcile: its order stored a while ago).
    pub async fn forget_sent(&self, bucket: &keys::Bucket, order: &OrderId) -> Result<(), GateError> {
        let _: u32 = self.link.conn().await?.hdel(keys::sent(bucket), order.as_str()).await?;
        Ok(())
    }

    /// The orders a bucket's sent record holds, each with when it was marked stored, for
    /// reconcile's care of it.
    pub async fn sent_entries(&self, bucket: &keys::Bucket) -> Result<Vec<(OutboxEntry, Option<i64>)>, GateError> {
        let all: HashMap<String, String> = self.link.conn().await?.hgetall(keys::sent(bucket)).await?;
        Ok(all.into_iter().filter_map(|(key, value)| sent_entry(key, value)).collect())
    }
}
