//! `GET /events/{id}/order`: the caller's own order, durable status from DynamoDB, else `PENDING`
//! while the cache holds a grab not yet stored.

use super::Query;
use crate::{
    domain::{EventId, OrderStatus, order::OrderView},
    http::{ApiError, Caller},
};

impl Query {
    /// The caller's order: durable status from DynamoDB, else `PENDING` while the cache holds a
    /// grab not yet persisted.
    pub(super) async fn order(&self, event: &EventId, caller: &Caller) -> Result<OrderView, ApiError> {
        let mut order = self.order_without_amount(event, caller).await?;
        order.amount = self.splits.amount_of(&self.rebuilder, event, order.ticket_no).await;
        Ok(order)
    }

    async fn order_without_amount(&self, event: &EventId, caller: &Caller) -> Result<OrderView, ApiError> {
        if let Some(order) = self.store.get_order(event, &caller.user).await? {
            return Ok(order);
        }
        let known = self.rebuilder.event(event).await?.ok_or(ApiError::EventNotFound)?;
        let held = match self.rebuilder.holding(&known, &caller.user).await.map_err(|_| ApiError::Busy)? {
            Some(held) => held,
            // A sharded event's promotion between its steps: the user has left the line and their
            // home does not hold the order yet. It is theirs: PENDING, never NO_ORDER.
            None => match self.gate.promotion_of(event, &caller.user).await? {
                Some(promoted) => promoted.holding(),
                None => return Err(ApiError::NoOrder),
            },
        };
        Ok(OrderView {
            order_id: held.order,
            event_id: event.clone(),
            ticket_no: held.ticket_no,
            status: OrderStatus::Pending,
            reason: None,
            checked_in_at: None,
            cancelled_at: None,
            amount: None,
        })
    }
}
