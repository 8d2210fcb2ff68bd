//! Giving a cancelled ticket number back: Redis takes it (to the waitlist's head, as a new order;
//! back on sale during the sale; held for the waitlist after it) and a promotion goes to the queue
//! like a grab's order. Used by cancel right after DynamoDB holds the cancellation, and by
//! reconcile for whatever a crash, a failover or a lost cache left behind (the `RETURN#<E>`
//! markers).
//!
//! A marker goes only once its number can no longer be lost: the promotion it made is on the
//! queue or on a replica, or Redis holds the number again. Until then a rebuild keeps the number
//! with the cancelled order, so the give-back runs again on the rebuilt cache.

use time::OffsetDateTime;

use crate::{
    delivery::{Courier, Delivery},
    domain::{EventId, OrderId, OrderMessage, TicketNo, event::epoch_ms, event::rfc3339},
    gate::{Gate, GateError, GaveBack, GiveBack},
    store::{Store, StoreError, cancellations::GiveBackDue},
};

#[derive(Debug, thiserror::Error)]
pub enum GiveBackError {
    #[error(transparent)]
    Gate(#[from] GateError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Clone)]
pub struct GiveBacks {
    gate: Gate,
    store: Store,
    courier: Courier,
}

impl GiveBacks {
    pub fn new(gate: Gate, store: Store, courier: Courier) -> Self {
        Self { gate, store, courier }
    }

    /// Gives `due`'s number back and sends the promotion it made, if any; its marker goes once
    /// nothing of it can be lost (above). `GaveBack::NotCached` leaves the marker: the cache is
    /// rebuilt first.
    pub async fn give_back(&self, event: &EventId, due: &GiveBackDue) -> Result<GaveBack, GiveBackError> {
        let promotion = OrderId::generate();
        let now = rfc3339(OffsetDateTime::now_utc());
        let give = GiveBack {
            event,
            user: &due.user,
            order_id: &due.order_id,
            ticket_no: due.ticket_no,
            cancelled_ms: epoch_ms(due.cancelled_at),
            promotion: &promotion,
            now: &now,
        };
        let (gave, written) = self.gate.give_back(&give).await?;
        let settled = match &gave {
            GaveBack::Promoted { order_id, message, .. } => {
                let delivery = Delivery {
                    event: event.clone(),
                    order_id: order_id.clone(),
                    message: message.clone(),
                    written,
                    generation: None,
                };
                self.courier.deliver(&delivery).await
            }
            GaveBack::Freed | GaveBack::HeldBack => true,
            // A retry: the promotion an earlier try made may still be only in the outbox of this
            // primary. The marker waits until the consumer has it (reconcile re-drives the outbox).
            GaveBack::Gone => !self.promotion_pending(event, due.ticket_no).await?,
            GaveBack::NotCached | GaveBack::LineLost => false,
        };
        if settled {
            self.store.give_back_done(event, &due.order_id).await?;
        }
        tracing::info!(
            event_id = %event,
            order_id = %due.order_id,
            ticket_no = %due.ticket_no,
            outcome = match &gave {
                GaveBack::Promoted { .. } => "PROMOTED",
                GaveBack::Freed => "FREED",
                GaveBack::HeldBack => "RETURNED",
                GaveBack::Gone => "GONE",
                GaveBack::NotCached => "NOT_CACHED",
                GaveBack::LineLost => "LINE_LOST",
            },
            settled,
            "ticket given back"
        );
        Ok(gave)
    }

    /// Whether the outbox still holds a promotion of this number (not yet stored by the consumer).
    async fn promotion_pending(&self, event: &EventId, ticket_no: TicketNo) -> Result<bool, GiveBackError> {
        Ok(self
            .gate
            .outbox(event)
            .await?
            .iter()
            .any(|entry| OrderMessage::parse(&entry.message).is_ok_and(|m| m.promoted && m.ticket_no == ticket_no)))
    }
}
