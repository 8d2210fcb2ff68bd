//! The sent records: every order that may be on the queue, kept on another shard than the bucket
//! that decided it (docs/DESIGN.md section 10). An order message goes to the queue only once its
//! bucket's sent record holds it ([`Gate::keep_sent`]); so when a bucket is lost whole, outbox and
//! all, the rebuild finds in its sent record every order a user may have been told of, and needs
//! nothing of the queue (whose depth SQS only approximates, and which another sale's backlog may
//! fill for minutes).

use std::{
    collections::HashMap,
    sync::{
        Arc, LazyLock,
        atomic::{AtomicU64, Ordering},
    },
};

use futures::{FutureExt, future::Shared};
use redis::AsyncCommands;

use super::{Gate, GateError, RebuildLock, cache_script, keys, link::LinkConn, opening_arg, outbox::OutboxEntry};
use crate::domain::{EventId, OrderId, UserId};

static KEEP_SENT_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(include_str!("keep_sent.lua")));
static LAY_SENT_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(include_str!("lay_sent.lua")));
static STOP_SENT_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(include_str!("stop_sent.lua")));
static WHOLE_OUTBOX_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(cache_script!("whole_outbox.lua", opening = ARGV[1])));

/// How long a sent record a rebuild's stop created (the record was lost) lives if no rebuild lays
/// it down: as long as a bucket remembers its stop.
const STOP_KEPT_MS: u64 = 600_000;

/// What became of an order asked to be kept in its sent record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// In the sent record, on its server's `replicas` replicas of which `acked` confirmed it
    /// (`WAIT`). It may be sent when the server has no replica or one confirmed it.
    Kept { replicas: u32, acked: u32 },
    /// Not kept: a rebuild stopped the record or laid the bucket down since the order was decided
    /// without it, or the record could not be laid down again. The order must not be sent now
    /// (the rebuild knows it from the outbox, or it was lost with its bucket before anyone was told
    /// of it); reconcile sends what the outbox still holds.
    Refused,
}

impl Kept {
    /// Whether the order may go to the queue: a copy of it outlives the loss of its bucket (the
    /// record is on another shard) and a failover of the record's own server (a replica has it,
    /// or there is none to promote).
    pub fn may_send(self) -> bool {
        matches!(self, Self::Kept { replicas, acked } if replicas == 0 || acked > 0)
    }

    /// Whether a replica holds it: an order whose send failed is then durable enough to be told
    /// `202` (reconcile sends it again from the outbox, or the rebuild from the record).
    pub fn replicated(self) -> bool {
        matches!(self, Self::Kept { acked, .. } if acked > 0)
    }
}

/// `WAIT`s on the connections that kept orders, shared: one `WAIT` sent after a write confirms every
/// write made on that connection before it, so orders kept at once share one (a rush would otherwise
/// queue one `WAIT` per order behind each other on the multiplexed connection).
#[derive(Default)]
pub(super) struct SentWaits {
    /// Counts the writes whose `WAIT` is asked for; a `WAIT` covers every count up to its own.
    written: AtomicU64,
    /// Per sent record (one connection's node): the `WAIT` under way and the last one answered.
    by_record: std::sync::Mutex<HashMap<String, WaitState>>,
}

type SharedWait = Shared<futures::future::BoxFuture<'static, Result<u32, Arc<GateError>>>>;

#[derive(Default)]
struct WaitState {
    in_flight: Option<(u64, SharedWait)>,
    answered: Option<(u64, u32)>,
}

impl SentWaits {
    /// How many replicas confirmed the write answered just before this call, on the connection
    /// `conn` leads to for `record`: a `WAIT` sent after that answer, this caller's own or one
    /// another caller sent since.
    async fn acked(&self, conn: &LinkConn, record: &str, timeout_ms: u64) -> Result<u32, GateError> {
        let mine = self.written.fetch_add(1, Ordering::SeqCst) + 1;
        loop {
            let (covers, wait) = {
                let mut all = self.by_record.lock().unwrap_or_else(|p| p.into_inner());
                let state = all.entry(record.to_owned()).or_default();
                if let Some((covers, acked)) = state.answered
                    && covers >= mine
                {
                    return Ok(acked);
                }
                match &state.in_flight {
                    Some((covers, wait)) => (*covers, wait.clone()),
                    None => {
                        // Every write counted so far was answered before this `WAIT` is sent.
                        let covers = self.written.load(Ordering::SeqCst);
                        let (mut conn, key) = (conn.clone(), record.to_owned());
                        let wait: SharedWait = async move {
                            let cmd = redis::cmd("WAIT").arg(1).arg(timeout_ms).to_owned();
                            conn.on_node_of::<u32>(&key, &cmd).await.map_err(Arc::new)
                        }
                        .boxed()
                        .shared();
                        state.in_flight = Some((covers, wait.clone()));
                        (covers, wait)
                    }
                }
            };
            let acked = wait.await;
            {
                let mut all = self.by_record.lock().unwrap_or_else(|p| p.into_inner());
                let state = all.entry(record.to_owned()).or_default();
                if state.in_flight.as_ref().is_some_and(|(c, _)| *c == covers) {
                    state.in_flight = None;
                }
                if let Ok(acked) = &acked
                    && state.answered.is_none_or(|(c, _)| c < covers)
                {
                    state.answered = Some((covers, *acked));
                }
            }
            // A `WAIT` sent before this caller's write was answered covers it not: the next one does.
            if covers >= mine {
                return acked.map_err(|e| GateError::Protocol(format!("WAIT: {e}")));
            }
        }
    }
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
                Some(("KEPT", replicas)) => {
                    let replicas: u32 =
                        replicas.parse().map_err(|_| GateError::Protocol(format!("keep_sent reply {reply:?}")))?;
                    let acked = if replicas == 0 {
                        0
                    } else {
                        let timeout = self.replica_wait.as_millis().max(1) as u64;
                        self.sent_waits.acked(&conn, &record, timeout).await?
                    };
                    return Ok(Kept::Kept { replicas, acked });
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

    /// Lays a lost sent record down again from its bucket's outbox, only while the bucket is cached
    /// in this history (nothing of its outbox was lost) and no rebuild has the record stopped.
    /// Whether the record is laid down now (by this call or another).
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
            return Err(GateError::Protocol("whole_outbox reply too short".into()));
        };
        let mut lay = LAY_SENT_SCRIPT.key(keys::sent(home));
        lay.arg("repair").arg(generation).arg(expiry);
        for entry in entries {
            lay.arg(entry);
        }
        let laid: String = lay.invoke_async(conn).await?;
        tracing::warn!(bucket = %home, laid = %laid, orders = entries.len() / 2, "a lost sent record laid down again from its bucket's outbox");
        let now_laid: bool = conn.hexists(keys::sent(home), keys::SENT_LAID).await?;
        Ok(now_laid)
    }

    /// A released event's sent records, laid down empty before its buckets (`Gate::warm`).
    pub(super) async fn warm_sent(
        &self,
        conn: &mut LinkConn,
        buckets: &keys::Buckets,
        generation: &str,
        expiry_ms: i64,
    ) -> Result<(), GateError> {
        for bucket in buckets.iter() {
            let _: String = LAY_SENT_SCRIPT
                .key(keys::sent(bucket))
                .arg("warm")
                .arg(generation)
                .arg(expiry_ms)
                .invoke_async(conn)
                .await?;
        }
        Ok(())
    }

    /// The rebuild's stop at every sent record, after the buckets stopped: whether every record is
    /// laid down (then they hold every order that may be on the queue).
    pub async fn stop_sent(&self, buckets: &keys::Buckets, lock: &RebuildLock) -> Result<bool, GateError> {
        let conn = self.link.conn().await?;
        let stops = buckets.iter().map(|bucket| {
            let mut conn = conn.clone();
            async move {
                let laid: i64 = STOP_SENT_SCRIPT
                    .key(keys::sent(bucket))
                    .arg(lock.token())
                    .arg(STOP_KEPT_MS)
                    .invoke_async(&mut conn)
                    .await?;
                Ok::<_, GateError>(laid == 1)
            }
        });
        Ok(futures::future::try_join_all(stops).await?.into_iter().all(|laid| laid))
    }

    /// Every order the sent records of these buckets hold.
    pub async fn sent_of(&self, buckets: &keys::Buckets) -> Result<Vec<OutboxEntry>, GateError> {
        let mut conn = self.link.conn().await?;
        let mut entries = Vec::new();
        for b in buckets.iter() {
            let all: Vec<(String, String)> = conn.hgetall(keys::sent(b)).await?;
            entries.extend(
                all.into_iter()
                    .filter_map(|(key, message)| Some(OutboxEntry { order_id: OrderId::parse(&key).ok()?, message })),
            );
        }
        Ok(entries)
    }

    /// A rebuild lays a bucket's sent record down (before the bucket opens), with the orders of its
    /// outbox as laid: only if this rebuild stopped it last. Whether it did.
    pub(super) async fn lay_sent(
        &self,
        conn: &mut LinkConn,
        bucket: &keys::Bucket,
        lock: &RebuildLock,
        expiry_ms: i64,
        orders: &[&OutboxEntry],
    ) -> Result<bool, GateError> {
        let mut lay = LAY_SENT_SCRIPT.key(keys::sent(bucket));
        lay.arg(lock.token()).arg(lock.token()).arg(expiry_ms);
        for entry in orders {
            lay.arg(entry.order_id.as_str()).arg(&entry.message);
        }
        let laid: String = lay.invoke_async(conn).await?;
        Ok(laid == "LAID")
    }

    /// Removes an order from its bucket's sent record once DynamoDB holds it (after its outbox
    /// entry): from its user's home, or for an entry whose user cannot be read, from every bucket's.
    pub(super) async fn remove_sent(
        &self,
        conn: &mut LinkConn,
        buckets: &keys::Buckets,
        user: Option<&UserId>,
        order: &OrderId,
    ) -> Result<(), GateError> {
        for b in buckets.iter().filter(|b| user.is_none_or(|u| buckets.home(u) == *b)) {
            let _: u32 = conn.hdel(keys::sent(b), order.as_str()).await?;
        }
        Ok(())
    }
}
