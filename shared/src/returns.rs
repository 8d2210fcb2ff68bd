//! Giving a cancelled ticket number back: Redis takes it (to the waitlist's head, as a new order,
//! or to the free numbers) and a promotion goes to the queue like a grab's order. Used by cancel
//! right after DynamoDB holds the cancellation, and by reconcile for whatever a crash or a lost
//! cache left behind (the `RETURN#<E>` markers).

use time::OffsetDateTime;

use crate::{
    domain::{EventId, OrderId, event::rfc3339, order_seal::SealKey},
    gate::{Gate, GateError, GaveBack, GiveBack},
    queue::OrderQueue,
    store::{Store, StoreError, after_sale::ReturnDue},
};

#[derive(Debug, thiserror::Error)]
pub enum ReturnError {
    #[error(transparent)]
    Gate(#[from] GateError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Clone)]
pub struct TicketReturns {
    gate: Gate,
    store: Store,
    queue: OrderQueue,
    /// Seals the promotion's order, as grab seals a grab's.
    seal: SealKey,
}

impl TicketReturns {
    pub fn new(gate: Gate, store: Store, queue: OrderQueue, seal: SealKey) -> Self {
        Self { gate, store, queue, seal }
    }

    /// Gives `due`'s number back and sends the promotion it made, if any; its marker goes once
    /// Redis has the number. `GaveBack::NotCached` leaves the marker: the cache is rebuilt first.
    pub async fn give_back(&self, event: &EventId, due: &ReturnDue) -> Result<GaveBack, ReturnError> {
        let promotion = OrderId::generate();
        let now = rfc3339(OffsetDateTime::now_utc());
        let give = GiveBack {
            event,
            user: &due.user,
            order_id: &due.order_id,
            ticket_no: due.ticket_no,
            promotion: &promotion,
            now: &now,
        };
        let gave = self.gate.give_back(&give).await?;
        if let GaveBack::Promoted { order_id, message, .. } = &gave {
            // In the outbox already: a failed send is re-driven by reconcile, like a grab's.
            if let Err(e) = self.queue.send(message, &self.seal).await {
                tracing::warn!(event_id = %event, order_id, error = %e, "promotion left in the outbox for reconcile");
            }
        }
        if gave != GaveBack::NotCached {
            self.store.return_done(event, &due.order_id).await?;
        }
        tracing::info!(
            event_id = %event,
            order_id = due.order_id,
            ticket_no = due.ticket_no,
            outcome = match &gave {
                GaveBack::Promoted { .. } => "PROMOTED",
                GaveBack::Freed => "FREED",
                GaveBack::Gone => "GONE",
                GaveBack::NotCached => "NOT_CACHED",
            },
            "ticket given back"
        );
        Ok(gave)
    }
}
