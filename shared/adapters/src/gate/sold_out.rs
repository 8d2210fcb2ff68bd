//! Refusals without the script (docs/DESIGN.md section 6): once the grab script has answered
//! `SOLD_OUT` for an event and every replica holds what the primary had written by then, this
//! environment remembers the event sold out for [`crate::config::GateSettings::sold_out_memory`].
//! Meanwhile a grab of that event reads the user's field once, on the reader (a replica), and is
//! answered from it: the order they hold (`ALREADY`), the one they cancelled, or `SOLD_OUT`.
//! Nothing runs on the primary and nothing is written per user.
//!
//! Why it is exact: a number only comes back during a sale by a cancellation, which gives it to the
//! waitlist's first user, or frees it to whoever grabs next; an environment that remembers the
//! event sold out answers `SOLD_OUT` for at most the memory's span, and the next grab after it runs
//! the script, which finds the number. No order is lost or sold twice: only the moment a freed
//! number reaches the crowd moves, by at most the span. A holder's retry reads their field on a
//! replica that had every holding made before the sell-out (`WAIT` for all of them before the
//! memory starts); a holding made after it (a freed number grabbed elsewhere, a promotion) reaches
//! the replica within its lag.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use super::{Gate, GateError, GrabOutcome, Written, keys, link};
use domain::{EventId, OrderId, UserId};

/// The events this environment remembers sold out: until when, and whether a grab is renewing the
/// memory now.
#[derive(Default)]
pub(super) struct SoldOutMemory {
    until: Mutex<HashMap<EventId, Remembered>>,
}

#[derive(Clone, Copy)]
struct Remembered {
    until: Instant,
    /// When a grab began renewing it, past `until`; others answer from the memory meanwhile.
    renewing_since: Option<Instant>,
}

/// The most an environment's memory of a sell-out lasts, against `SOLD_OUT_MEMORY_MS` for each
/// bucket: its span is drawn between the two.
pub const SOLD_OUT_MEMORY_SPREAD: f64 = 1.5;

/// How long a renewal may be under way before another grab starts one (the first may have failed
/// without saying: its grab answered `503`).
const RENEWAL_GRACE: Duration = Duration::from_secs(2);

/// What a grab of an event finds in the memory.
#[derive(Debug, PartialEq, Eq)]
enum Recall {
    /// Remembered sold out (or being renewed by another grab): the reader answers.
    SoldOut,
    /// Not remembered, or its memory passed: this grab runs the script (and so renews it, when
    /// the script says sold out again).
    Ask,
}

impl SoldOutMemory {
    /// The memory of `event`, for one grab. Past its span, one grab at a time renews it (the first
    /// to ask); the others answer from it meanwhile, for at most [`RENEWAL_GRACE`]: each
    /// environment runs one renewal at a time, however busy, rather than every grab that comes
    /// while the primaries are slow running the script (which would make them slower).
    fn recall(&self, event: &EventId) -> Recall {
        let mut all = self.until.lock().unwrap_or_else(|p| p.into_inner());
        let Some(memory) = all.get_mut(event) else { return Recall::Ask };
        let now = Instant::now();
        if now < memory.until {
            return Recall::SoldOut;
        }
        match memory.renewing_since {
            Some(since) if now.duration_since(since) < RENEWAL_GRACE => Recall::SoldOut,
            _ => {
                memory.renewing_since = Some(now);
                Recall::Ask
            }
        }
    }

    #[cfg(test)]
    fn remembers(&self, event: &EventId) -> bool {
        let until = self.until.lock().unwrap_or_else(|p| p.into_inner());
        until.get(event).is_some_and(|m| Instant::now() < m.until)
    }

    fn remember(&self, event: &EventId, span: Duration) {
        let mut until = self.until.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        // Events whose memory passed (and is not being renewed) leave: the map holds the events
        // selling out now.
        until.retain(|_, m| m.until > now || m.renewing_since.is_some_and(|s| now.duration_since(s) < RENEWAL_GRACE));
        until.insert(event.clone(), Remembered { until: now + span, renewing_since: None });
    }

    /// The script said other than sold out (a number was found, or the sale ended), or the
    /// replicas could not be shown to hold the sell-out: the event is forgotten, so every grab
    /// asks the script again.
    fn forget(&self, event: &EventId) {
        self.until.lock().unwrap_or_else(|p| p.into_inner()).remove(event);
    }

    /// A renewal's grab answered before the script looked at the stock (the user's own holding,
    /// their rate): the next grab renews.
    fn undecided(&self, event: &EventId) {
        if let Some(memory) = self.until.lock().unwrap_or_else(|p| p.into_inner()).get_mut(event) {
            memory.renewing_since = None;
        }
    }
}

impl Gate {
    /// A grab of an event this environment remembers sold out, answered from the user's field on
    /// the reader; `None` when the event is not remembered, or the reader cannot say (the script
    /// decides then).
    pub async fn refusal_without_script(&self, event: &EventId, user: &UserId) -> Option<GrabOutcome> {
        if self.sold_out.recall(event) == Recall::Ask {
            return None;
        }
        let buckets = self.buckets(event).await.ok()?;
        match self.reader.user_field(&self.link, buckets.home(user), user).await {
            Ok(Some(field)) => Some(refusal(field.as_deref())),
            // The user's home is not there (lost, not yet rebuilt): its field says nothing of what
            // they hold, so the script decides (and the event is rebuilt first).
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(event_id = %event, error = %e, "the reader could not answer; the grab script decides");
                None
            }
        }
    }

    /// After the script answered other than `SOLD_OUT`: the event is not remembered sold out.
    pub fn forget_sold_out(&self, event: &EventId) {
        self.sold_out.forget(event);
    }

    /// After the script answered before it looked at the stock (`ALREADY`, `ORDER_CANCELLED`,
    /// `RATE_LIMITED`): the memory stands, and the next grab past it renews it.
    pub fn renewal_undecided(&self, event: &EventId) {
        self.sold_out.undecided(event);
    }

    /// After the script answered `SOLD_OUT` on `written`'s connection: remember the event sold out
    /// once every replica holds what the primary had written by then (so the reader has every
    /// holding made before the sell-out). A replica that does not catch up within the replica wait
    /// leaves the event unremembered: the next grab runs the script again.
    pub async fn remember_sold_out(&self, event: &EventId, written: &Written) {
        if self.sold_out_memory.is_zero() {
            return;
        }
        // A sharded event's memory lasts its span for each bucket: renewing it runs the script on
        // every bucket and checks each one's replicas, so each environment then costs the cache
        // what an unsharded event's renewal does (docs/SCALE.md: 14 buckets, 1.1 ms a renewal,
        // each of a warm fleet's 14,400 environments once a second would take every master).
        // Drawn between it and [`SOLD_OUT_MEMORY_SPREAD`] times it: a fleet that learnt the
        // sell-out in the same second would otherwise renew in the same moments.
        let buckets = self.buckets(event).await.map_or(1, |b| u32::from(b.count()));
        let random = crate::random_fraction();
        let span = (self.sold_out_memory * buckets).mul_f64(1.0 + (SOLD_OUT_MEMORY_SPREAD - 1.0) * random);
        // Replicas that cannot be shown to hold the sell-out: nothing is remembered (and a memory
        // being renewed is forgotten), so the script decides.
        match self.every_bucket_replicated(event, written).await {
            Ok(true) => self.sold_out.remember(event, span),
            Ok(false) => {
                self.sold_out.forget(event);
                tracing::info!(event_id = %event, "a replica lags; sold out is not remembered yet")
            }
            Err(e) => {
                self.sold_out.forget(event);
                tracing::warn!(event_id = %event, error = %e, "replication unknown; sold out is not remembered")
            }
        }
    }

    /// Whether every replica holds what was written by then on `written`'s server, and for a
    /// sharded event on each of its buckets' servers (its holdings live in every bucket).
    async fn every_bucket_replicated(&self, event: &EventId, written: &Written) -> Result<bool, GateError> {
        let buckets = self.buckets(event).await?;
        if !buckets.is_sharded() {
            return self.all_replicas_hold(written).await;
        }
        for b in buckets.iter() {
            if !self.all_replicas_hold(&Written { conn: written.conn.clone(), key: keys::meta(b) }).await? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    async fn all_replicas_hold(&self, written: &Written) -> Result<bool, GateError> {
        let mut conn = written.conn.clone();
        let info: String = conn.on_node_of(&written.key, redis::cmd("INFO").arg("replication")).await?;
        let replicas = link::replicas(&info);
        if replicas == 0 {
            return Ok(true);
        }
        let timeout = self.replica_wait.as_millis().max(1) as u64;
        let acked: u32 = conn.on_node_of(&written.key, redis::cmd("WAIT").arg(replicas).arg(timeout)).await?;
        Ok(acked >= replicas)
    }
}

/// The answer a user's field gives once the event is sold out.
fn refusal(field: Option<&str>) -> GrabOutcome {
    match field {
        Some(value) => match (keys::parse_holding(value), value.strip_prefix('!').and_then(|o| OrderId::parse(o).ok()))
        {
            (Some(holding), _) => GrabOutcome::Already(holding),
            (None, Some(cancelled)) => GrabOutcome::Cancelled(cancelled),
            // A refusal counter (`#...`): no order.
            (None, None) => GrabOutcome::SoldOut,
        },
        None => GrabOutcome::SoldOut,
    }
}

/// Where refusals read a user's field: a replica (the reader endpoint; in cluster mode the slot's
/// replicas), or the primary when no reader is configured.
pub(super) enum Reader {
    Primary,
    Single(Box<SingleRead>),
    Cluster(Box<ReplicaReads>),
}

/// One replica's connection, made again after a read that timed out or lost it (the manager
/// reconnects by itself only on a connection it sees closed: one gone silent, a frozen
/// environment's, would time out every refusal until the kernel gives up on it).
pub(super) struct SingleRead {
    client: redis::Client,
    config: redis::aio::ConnectionManagerConfig,
    conn: Mutex<redis::aio::ConnectionManager>,
}

impl SingleRead {
    pub(super) fn new(client: redis::Client, config: redis::aio::ConnectionManagerConfig) -> Result<Self, GateError> {
        let conn = redis::aio::ConnectionManager::new_lazy_with_config(client.clone(), config.clone())?;
        Ok(Self { client, config, conn: Mutex::new(conn) })
    }

    fn connection(&self) -> redis::aio::ConnectionManager {
        self.conn.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn forget(&self) {
        if let Ok(fresh) = redis::aio::ConnectionManager::new_lazy_with_config(self.client.clone(), self.config.clone())
        {
            *self.conn.lock().unwrap_or_else(|p| p.into_inner()) = fresh;
        }
    }
}

/// A read that timed out or lost its connection: the connection is not to be trusted again.
fn lost(e: &redis::RedisError) -> bool {
    e.is_timeout() || e.is_connection_dropped() || e.is_io_error()
}

/// A cluster client that reads from each slot's replicas, connected on first use. Its map of the
/// slots is the cluster's when it connected (the client reads it again only after an error), so a
/// replica added later would never be read: past `refresh`, the next read starts a connection with
/// a fresh map in the background and the reads move to it once it is made.
pub(super) struct ReplicaReads {
    client: redis::cluster::ClusterClient,
    refresh: Duration,
    kept: Arc<Mutex<Option<(Instant, redis::cluster_async::ClusterConnection)>>>,
    renewing: Arc<AtomicBool>,
}

impl ReplicaReads {
    /// `refresh` drawn between half and one and a half of it for this environment: a warm fleet
    /// connects within the same minutes, and would read the slots again all together.
    pub(super) fn new(client: redis::cluster::ClusterClient, refresh: Duration) -> Self {
        let random = crate::random_fraction();
        Self { client, refresh: refresh.mul_f64(0.5 + random), kept: Arc::default(), renewing: Arc::default() }
    }

    fn forget(&self) {
        *self.kept.lock().expect("reader") = None;
    }

    async fn connection(&self) -> Result<redis::cluster_async::ClusterConnection, GateError> {
        let kept = self.kept.lock().expect("reader").clone();
        let Some((made, conn)) = kept else {
            let fresh = self.client.get_async_connection().await?;
            *self.kept.lock().expect("reader") = Some((Instant::now(), fresh.clone()));
            return Ok(fresh);
        };
        if made.elapsed() >= self.refresh && !self.renewing.swap(true, Ordering::AcqRel) {
            let (client, kept, renewing) = (self.client.clone(), self.kept.clone(), self.renewing.clone());
            tokio::spawn(async move {
                match client.get_async_connection().await {
                    Ok(fresh) => *kept.lock().expect("reader") = Some((Instant::now(), fresh)),
                    // The old map keeps serving; the next period tries again.
                    Err(e) => {
                        tracing::warn!(error = %e, "the reader's slot map could not be read again");
                        if let Some((made, _)) = kept.lock().expect("reader").as_mut() {
                            *made = Instant::now();
                        }
                    }
                }
                renewing.store(false, Ordering::Release);
            });
        }
        Ok(conn)
    }
}

impl Reader {
    /// Connects now (a provisioned grab environment's init): unconnected, every environment of a
    /// warm fleet would connect at the first sold-out refusal, all in the same second, each a TLS
    /// handshake on the reader's node (in cluster mode, on every node), just as the sale ends.
    pub(super) async fn connect(&self) -> Result<(), GateError> {
        match self {
            Self::Primary => Ok(()),
            Self::Single(single) => {
                redis::cmd("PING").query_async(&mut single.connection()).await.map_err(GateError::from)
            }
            Self::Cluster(reads) => reads.connection().await.map(drop),
        }
    }

    /// The user's field at their home bucket, read with the bucket's `generation` in one command;
    /// `None` when the bucket has none (its meta is not there: lost, or not laid down yet).
    async fn user_field(
        &self,
        primary: &link::Link,
        event: &keys::Bucket,
        user: &UserId,
    ) -> Result<Option<Option<String>>, GateError> {
        let mut read = redis::cmd("HMGET");
        read.arg(keys::meta(event)).arg(keys::user_field(user)).arg("generation");
        let read: Result<(Option<String>, Option<String>), redis::RedisError> = match self {
            Self::Primary => read.query_async(&mut primary.conn().await?).await,
            Self::Single(single) => read.query_async(&mut single.connection()).await,
            Self::Cluster(reads) => read.query_async(&mut reads.connection().await?).await,
        };
        let (field, generation) = read.inspect_err(|e| {
            if lost(e) {
                match self {
                    Self::Single(single) => single.forget(),
                    Self::Cluster(reads) => reads.forget(),
                    Self::Primary => {}
                }
            }
        })?;
        Ok(generation.map(|_| field))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::Holding;

    #[test]
    fn a_users_field_answers_a_sold_out_grab() {
        let order = OrderId::generate();
        let held = keys::holding(&Holding { order: order.clone(), ticket_no: domain::TicketNo::new(7) });
        assert_eq!(
            refusal(Some(&held)),
            GrabOutcome::Already(Holding { order: order.clone(), ticket_no: domain::TicketNo::new(7) })
        );
        assert_eq!(refusal(Some(&keys::cancelled(&order))), GrabOutcome::Cancelled(order));
        assert_eq!(refusal(Some("#000001795619000000:3")), GrabOutcome::SoldOut);
        assert_eq!(refusal(None), GrabOutcome::SoldOut);
    }

    /// Past its span, one grab renews the memory (it runs the script) while the others answer
    /// from it, until the renewal lands, says otherwise, or outlasts its grace.
    #[test]
    fn one_grab_at_a_time_renews_a_memory_past_its_span() {
        let memory = SoldOutMemory::default();
        let event = EventId::parse("lecture").unwrap();
        assert_eq!(memory.recall(&event), Recall::Ask, "never remembered: the script decides");
        memory.remember(&event, Duration::from_millis(20));
        assert_eq!(memory.recall(&event), Recall::SoldOut);
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(memory.recall(&event), Recall::Ask, "past its span: this grab renews it");
        assert_eq!(memory.recall(&event), Recall::SoldOut, "the others answer from it meanwhile");
        memory.remember(&event, Duration::from_millis(20));
        assert_eq!(memory.recall(&event), Recall::SoldOut, "renewed");
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(memory.recall(&event), Recall::Ask);
        memory.undecided(&event);
        assert_eq!(memory.recall(&event), Recall::Ask, "a renewal that said nothing of the stock: the next renews");
        memory.forget(&event);
        assert_eq!(memory.recall(&event), Recall::Ask, "the script found a number: every grab asks it");
        assert_eq!(memory.recall(&event), Recall::Ask);
    }

    #[test]
    fn the_memory_holds_for_its_span_only() {
        let memory = SoldOutMemory::default();
        let event = EventId::parse("lecture").unwrap();
        assert!(!memory.remembers(&event));
        memory.remember(&event, Duration::from_millis(50));
        assert!(memory.remembers(&event));
        std::thread::sleep(Duration::from_millis(60));
        assert!(!memory.remembers(&event), "forgotten after its span");
    }
}
