//! Rebuilding a lost cache (ElastiCache failover, restart, `FLUSHALL`) exactly from DynamoDB.
//! A cache written before a failover counts as lost (`gate::link`): the promoted replica may lack
//! the old primary's last writes, so it is rebuilt the same way.
//!
//! DynamoDB is complete only once the orders still in flight on the queue are stored, so a rebuild
//! waits for the queue to drain (answering "busy" meanwhile), for at most `max_wait` after the loss
//! was first seen; past that it proceeds, and DynamoDB's conditions still turn any clash with a
//! late order into a `REJECTED` order, never an oversold ticket.

use std::{collections::HashSet, time::Duration};

use time::OffsetDateTime;

use crate::{
    domain::{
        Buyer, Event, EventId, Holdings, OrderMessage, UserId,
        event::{SalePhase, epoch_ms},
    },
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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rebuild {
    /// The cache was rebuilt now.
    Done,
    /// The cache is there (someone else rebuilt it, or it was never lost).
    Present,
    /// Another rebuild holds the lock, or orders are still in flight: ask again shortly.
    Busy,
    /// The sale is over: nothing needs its cache, so nobody can make the system rebuild one.
    Ended,
}

#[derive(Clone)]
pub struct Rebuilder {
    store: Store,
    gate: Gate,
    queue: OrderQueue,
    settings: RebuildSettings,
}

impl Rebuilder {
    pub fn new(store: Store, gate: Gate, queue: OrderQueue, settings: RebuildSettings) -> Self {
        Self { store, gate, queue, settings }
    }

    pub async fn rebuild(&self, event: &Event) -> Result<Rebuild, RecoveryError> {
        if event.sale_phase(OffsetDateTime::now_utc()) == SalePhase::Ended {
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
            let in_flight = self.queue.in_flight().await?;
            if in_flight > 0 {
                tracing::info!(event_id = %event.id, in_flight, waited_ms = waited.as_millis() as u64, "rebuild waits for in-flight orders");
                return Ok(Rebuild::Busy);
            }
        }
        let mut holdings = self.store.holdings(&event.id).await?;
        self.add_undelivered(&event.id, &mut holdings).await?;
        if self.gate.rebuild(event, &holdings, self.settings.lock_ttl).await? {
            tracing::warn!(
                event_id = %event.id,
                buyers = holdings.buyers.len(),
                held = holdings.held.len(),
                "cache rebuilt from DynamoDB"
            );
            return Ok(Rebuild::Done);
        }
        Ok(if self.gate.window(&event.id).await?.is_some() { Rebuild::Present } else { Rebuild::Busy })
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
