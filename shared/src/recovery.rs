//! Rebuilding a lost cache (ElastiCache failover, restart, `FLUSHALL`) exactly from DynamoDB.
//! A cache written before a failover counts as lost (`gate::link`): the promoted replica may lack
//! the old primary's last writes, so it is rebuilt the same way.
//!
//! DynamoDB is complete only once the orders still in flight on the queue are stored, so a rebuild
//! waits for the queue to drain (answering "busy" meanwhile), for at most `max_wait` after the loss
//! was first seen; past that it proceeds, and DynamoDB's conditions still turn any clash with a
//! late order into a `REJECTED` order, never an oversold ticket.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use time::OffsetDateTime;

use crate::{
    domain::{Buyer, Event, EventId, Holdings, OrderMessage, UserId, event::epoch_ms},
    gate::{Gate, GateError},
    queue::{OrderQueue, QueueError},
    store::{Store, StoreError},
};

pub use crate::config::RebuildSettings;

#[derive(Debug, thiserror::Error)]
pub enum RecoveryError {
    #[error(transparent)]
    Gate(#[from] GateError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Queue(#[from] QueueError),
    #[error("the queue's depth was not read within {0:?}")]
    QueueSlow(Duration),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rebuild {
    /// The cache was rebuilt now.
    Done,
    /// The cache is there (someone else rebuilt it, or it was never lost).
    Present,
    /// Another rebuild holds the lock, or orders are still in flight: ask again shortly.
    Busy,
    /// The sale and its cancellation window are over: nothing needs its cache, so nobody can make
    /// the system rebuild one.
    Ended,
}

/// How long a reading of the queue's depth stands: while a cache is lost every request asks for a
/// rebuild, and one reading serves them all instead of one queue call each.
const DEPTH_READ_EVERY: Duration = Duration::from_millis(250);
/// How long one reading may take before the rebuild answers "busy" instead.
const DEPTH_READ_LIMIT: Duration = Duration::from_secs(1);
/// Events remembered per execution environment (they never change once released).
const EVENTS_KEPT: usize = 1_000;

#[derive(Clone)]
pub struct Rebuilder {
    store: Store,
    gate: Gate,
    queue: OrderQueue,
    settings: RebuildSettings,
    /// The last reading of the queue's depth; held while a reading is taken, so a burst takes one.
    depth: Arc<tokio::sync::Mutex<Option<(Instant, u64)>>>,
    events: Arc<Mutex<HashMap<EventId, Event>>>,
}

impl Rebuilder {
    pub fn new(store: Store, gate: Gate, queue: OrderQueue, settings: RebuildSettings) -> Self {
        Self { store, gate, queue, settings, depth: Arc::default(), events: Arc::default() }
    }

    /// A released event, remembered once read: a lost cache makes every request of the sale ask
    /// for its event until the rebuild, and an event never changes once released. `None` for an
    /// event DynamoDB does not know (never remembered, so unknown ids cannot fill the memory).
    pub async fn event(&self, id: &EventId) -> Result<Option<Event>, RecoveryError> {
        if let Some(event) = self.events.lock().expect("events").get(id) {
            return Ok(Some(event.clone()));
        }
        let Some(stored) = self.store.get_event(id).await? else { return Ok(None) };
        let mut events = self.events.lock().expect("events");
        if events.len() >= EVENTS_KEPT {
            events.clear();
        }
        events.insert(id.clone(), stored.event.clone());
        Ok(Some(stored.event))
    }

    async fn in_flight(&self) -> Result<u64, RecoveryError> {
        let mut depth = self.depth.lock().await;
        if let Some((read_at, n)) = *depth
            && read_at.elapsed() < DEPTH_READ_EVERY
        {
            return Ok(n);
        }
        // Bounded: the others wait on this reading, and one stalled call must not hold them all.
        let n = tokio::time::timeout(DEPTH_READ_LIMIT, self.queue.in_flight())
            .await
            .map_err(|_| RecoveryError::QueueSlow(DEPTH_READ_LIMIT))??;
        *depth = Some((Instant::now(), n));
        Ok(n)
    }

    pub async fn rebuild(&self, event: &Event) -> Result<Rebuild, RecoveryError> {
        // After the sale, the cache serves cancellations until their window closes.
        if OffsetDateTime::now_utc() >= event.active_until() {
            return Ok(Rebuild::Ended);
        }
        if self.gate.window(&event.id).await?.is_some() {
            return Ok(Rebuild::Present);
        }
        let now = epoch_ms(OffsetDateTime::now_utc());
        let lost_since = self.gate.mark_lost(&event.id, now).await?;
        let waited = Duration::from_millis((now - lost_since).max(0) as u64);
        if waited < self.settings.settle {
            return Ok(Rebuild::Busy);
        }
        if waited < self.settings.max_wait {
            let in_flight = self.in_flight().await?;
            if in_flight > 0 {
                tracing::info!(event_id = %event.id, in_flight, waited_ms = waited.as_millis() as u64, "rebuild waits for in-flight orders");
                return Ok(Rebuild::Busy);
            }
        }
        let Some(lock) = self.gate.lock_rebuild(&event.id, self.settings.lock_ttl).await? else {
            // Another rebuild is under way (or just finished).
            return Ok(if self.gate.window(&event.id).await?.is_some() { Rebuild::Present } else { Rebuild::Busy });
        };
        let rebuilt = async {
            // A rebuild that held the lock just before may have finished: no DynamoDB reads then.
            if self.gate.window(&event.id).await?.is_some() {
                return Ok((false, Holdings::default()));
            }
            let mut holdings = self.store.holdings(&event.id).await?;
            self.add_undelivered(&event.id, &mut holdings).await?;
            let done = self.gate.rebuild(&lock, event, &holdings).await?;
            Ok::<_, RecoveryError>((done, holdings))
        }
        .await;
        self.gate.unlock_rebuild(lock).await?;
        let (done, holdings) = rebuilt?;
        if !done {
            return Ok(Rebuild::Present);
        }
        tracing::warn!(
            event_id = %event.id,
            buyers = holdings.buyers.len(),
            held = holdings.held.len(),
            "cache rebuilt from DynamoDB"
        );
        Ok(Rebuild::Done)
    }

    /// Orders that survived in the outbox (the cache was lost in part, or the send failed and the
    /// queue has drained without them) hold their users and numbers too: DynamoDB does not have
    /// them yet, reconcile will deliver them.
    async fn add_undelivered(&self, event: &EventId, holdings: &mut Holdings) -> Result<(), RecoveryError> {
        let outbox = self.gate.outbox(event).await?;
        if outbox.is_empty() {
            return Ok(());
        }
        let users: HashSet<UserId> = holdings.buyers.iter().map(|b| b.user.clone()).collect();
        for entry in outbox {
            let Ok(message) = OrderMessage::parse(&entry.message) else { continue };
            let (user, order) = (message.user_id, message.order_id);
            // A number already held by a stored order stays with it; DynamoDB rejects the other.
            if users.contains(&user) || !holdings.held.insert(message.ticket_no) {
                continue;
            }
            holdings.buyers.push(Buyer { user, order, ticket_no: message.ticket_no });
        }
        Ok(())
    }
}
