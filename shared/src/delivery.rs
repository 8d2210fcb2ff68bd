//! Sending an order the gate wrote to the outbox (a grab's, or a promotion from the waitlist) to
//! the orders queue. The order is durable once it is on the queue, or, when the send failed, once
//! a replica holds its outbox entry (`WAIT`): reconcile re-drives the outbox either way, and only a
//! failover before any replica had the entry could lose it.

use crate::{
    domain::{EventId, OrderId, order_seal::SealKey},
    gate::{Gate, Written},
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

    /// Sends the order; says whether it is durable somewhere (on the queue, or on a replica).
    pub async fn deliver(&self, order: &Delivery) -> bool {
        let Err(e) = self.send(&order.message).await else { return true };
        let replicas = match self.gate.replicated(&order.written).await {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(event_id = %order.event, error = %e, "replica count unknown");
                0
            }
        };
        tracing::warn!(event_id = %order.event, order_id = %order.order_id, error = %e, replicas, "order left in the outbox for reconcile");
        replicas > 0
    }

    /// Sends one order message, sealed with the current key.
    pub async fn send(&self, message: &str) -> Result<String, QueueError> {
        self.queue.send_sealed(message, &self.seal).await
    }
}
