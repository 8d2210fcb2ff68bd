//! Sending an order the gate wrote to the outbox (a grab's, or a promotion from the waitlist) to
//! the orders queue. First its bucket's sent record keeps it (on another shard, confirmed by a
//! replica where the record's server has one): an order is never on the queue unless a lost bucket's
//! rebuild can find it there (docs/DESIGN.md section 10). The order is durable once it is on the
//! queue, or, when the send failed, once a replica holds it: reconcile re-drives the outbox either
//! way.

use crate::{
    domain::{EventId, OrderId, OrderMessage, order_seal::SealKey},
    gate::{Gate, Kept, Written},
    queue::{OrderQueue, QueueError},
    secrets::StagedSecret,
};

/// An order in the outbox, on its way to the queue.
pub struct Delivery {
    pub event: EventId,
    pub order_id: OrderId,
    pub message: String,
    /// Where the outbox entry was written, to ask its replicas when the send fails.
    pub written: Written,
    /// The lay-down of the bucket that decided the order, when its script said (a grab's); `None`:
    /// read with the order still in its outbox.
    pub generation: Option<String>,
}

#[derive(Clone)]
pub struct Courier {
    gate: Gate,
    queue: OrderQueue,
    /// Seals each order it sends (`domain::order_seal`) with the current key.
    seal: StagedSecret<SealKey>,
}

impl Courier {
    pub fn new(gate: Gate, queue: OrderQueue, seal: StagedSecret<SealKey>) -> Self {
        Self { gate, queue, seal }
    }

    /// Keeps the order in its sent record, then sends it; says whether it is durable somewhere (on
    /// the queue, or on a replica), so its user may be told `202`. An order its record did not keep
    /// is not sent: it stays in the outbox (reconcile sends it once its record keeps it), or it went
    /// with its lost bucket before anyone was told of it.
    pub async fn deliver(&self, order: &Delivery) -> bool {
        let kept = match self.keep(&order.event, &order.order_id, &order.message, order.generation.as_deref()).await {
            Some(kept) if kept.may_send() => kept,
            _ => return false,
        };
        let Err(e) = self.send(&order.message).await else { return true };
        let replicas = if kept.replicated() {
            1
        } else {
            match self.gate.replicated(&order.written).await {
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!(event_id = %order.event, error = %e, "replica count unknown");
                    0
                }
            }
        };
        tracing::warn!(event_id = %order.event, order_id = %order.order_id, error = %e, replicas, "order left in the outbox for reconcile");
        replicas > 0
    }

    /// The order kept in its bucket's sent record; `None` when it may not be sent now (logged).
    pub async fn keep(
        &self,
        event: &EventId,
        order_id: &OrderId,
        message: &str,
        generation: Option<&str>,
    ) -> Option<Kept> {
        let user = match OrderMessage::parse(message) {
            Ok(m) => m.user_id,
            Err(e) => {
                tracing::error!(event_id = %event, order_id = %order_id, error = %e, "an order message that does not parse is not sent");
                return None;
            }
        };
        match self.gate.keep_sent(event, &user, order_id, message, generation).await {
            Ok(kept) if kept.may_send() => Some(kept),
            Ok(kept) => {
                tracing::warn!(event_id = %event, order_id = %order_id, ?kept, "order not sent: its sent record did not keep it");
                None
            }
            Err(e) => {
                tracing::warn!(event_id = %event, order_id = %order_id, error = %e, "order not sent: its sent record could not be written");
                None
            }
        }
    }

    /// Sends one order message, sealed with the current key.
    pub async fn send(&self, message: &str) -> Result<String, QueueError> {
        self.queue.send_sealed(message, &self.seal).await
    }
}
