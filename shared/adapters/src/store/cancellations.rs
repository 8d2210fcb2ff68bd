//! Cancellations in DynamoDB: cancelling an order (one transaction that frees its ticket number
//! and leaves a give-back marker), and the numbers still to be given back in Redis.

use aws_sdk_dynamodb::{
    operation::transact_write_items::TransactWriteItemsError,
    types::{Delete, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update},
};
use time::OffsetDateTime;

use super::{
    Store, StoreError, built,
    codec::{Item, get_n, get_s, n, s},
    orders::order_from_item,
    schema::{attr, key},
};
use domain::{EventId, OrderId, OrderStatus, TicketNo, UserId, event::rfc3339, order::OrderView};

/// What cancelling found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cancellation {
    /// Cancelled now: the ticket number is free in DynamoDB and due back in Redis.
    Cancelled(OrderView),
    /// Cancelled before (a retry): the same result.
    AlreadyCancelled(OrderView),
    /// Scanned at the door already: a used ticket is not given back.
    CheckedIn { at: String },
    /// The order is not one that holds a ticket (rejected).
    NotCancellable(OrderStatus),
}

/// A cancelled order whose number Redis has not taken back yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GiveBackDue {
    pub user: UserId,
    pub order_id: OrderId,
    pub ticket_no: TicketNo,
    /// When the order was cancelled: after the sale's end a number nobody waits for is held for
    /// the waitlist.
    pub cancelled_at: OffsetDateTime,
}

/// A cancellation's update of the order: what it sets, what it checks, the names it uses (only
/// attributes grab may update: `schema::updated::GRAB_ORDER`).
pub(super) const CANCEL: &str = "SET #status = :cancelled, cancelled_at = :now, #gsi2pk = :off_list";
pub(super) const CANCEL_IF: &str = "order_id = :order AND #status = :confirmed AND attribute_not_exists(checked_in_at)";
pub(super) const CANCEL_NAMES: [(&str, &str); 2] = [("#status", "status"), ("#gsi2pk", attr::GSI2PK)];

fn update(u: Update) -> TransactWriteItem {
    TransactWriteItem::builder().update(u).build()
}

impl Store {
    /// Cancels the user's order `order_id`, in one transaction: the order becomes `CANCELLED`
    /// (only while it is `CONFIRMED`, this order and not checked in), its ticket item is deleted
    /// (only while this order holds it), and a give-back marker records that Redis must take the
    /// number back.
    pub async fn cancel_order(
        &self,
        event: &EventId,
        user: &UserId,
        current: &OrderView,
        now: OffsetDateTime,
    ) -> Result<Cancellation, StoreError> {
        let order_id = current.order_id.as_str();
        let at = rfc3339(now);
        let cancel = built(
            Update::builder()
                .table_name(&self.table)
                .key(attr::PK, s(key::order(event, user)))
                .key(attr::SK, s(key::ORDER_SK))
                .update_expression(CANCEL)
                .condition_expression(CANCEL_IF)
                .expression_attribute_names(CANCEL_NAMES[0].0, CANCEL_NAMES[0].1)
                .expression_attribute_names(CANCEL_NAMES[1].0, CANCEL_NAMES[1].1)
                .expression_attribute_values(":cancelled", s(OrderStatus::Cancelled.as_str()))
                .expression_attribute_values(":confirmed", s(OrderStatus::Confirmed.as_str()))
                .expression_attribute_values(":order", s(order_id))
                .expression_attribute_values(":now", s(&at))
                .expression_attribute_values(":off_list", s(key::cancelled(event)))
                .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
                .build(),
        )?;
        let free = built(
            Delete::builder()
                .table_name(&self.table)
                .key(attr::PK, s(key::ticket(event, current.ticket_no)))
                .key(attr::SK, s(key::TICKET_SK))
                .condition_expression("order_id = :order")
                .expression_attribute_values(":order", s(order_id))
                .build(),
        )?;
        let due = built(
            Put::builder()
                .table_name(&self.table)
                .item(attr::PK, s(key::give_back_marker(event)))
                .item(attr::SK, s(format!("{}{order_id}", key::RETURN_SK_PREFIX)))
                .item("order_id", s(order_id))
                .item("user_id", s(user.as_str()))
                .item("ticket_no", n(current.ticket_no))
                .item("cancelled_at", s(&at))
                .build(),
        )?;
        let result = self
            .client
            .transact_write_items()
            .transact_items(update(cancel))
            .transact_items(TransactWriteItem::builder().delete(free).build())
            .transact_items(TransactWriteItem::builder().put(due).build())
            .send()
            .await;
        let err = match result {
            Ok(_) => {
                let mut view = current.clone();
                view.status = OrderStatus::Cancelled;
                view.cancelled_at = Some(at);
                return Ok(Cancellation::Cancelled(view));
            }
            Err(e) => e,
        };
        let Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) = err.as_service_error() else {
            return Err(err.into());
        };
        let reasons = cancelled.cancellation_reasons();
        if reasons.first().and_then(|r| r.code()) != Some("ConditionalCheckFailed") {
            // A concurrent transaction on the same items (a check-in, a retry): the caller retries.
            return Err(StoreError::Dynamo(format!(
                "cancellation cancelled: {:?}",
                reasons.iter().map(|r| r.code()).collect::<Vec<_>>()
            )));
        }
        let old = match reasons.first().and_then(|r| r.item()) {
            Some(item) => item.clone(),
            None => {
                self.order_record(event, user).await?.ok_or_else(|| StoreError::Malformed("order vanished".into()))?
            }
        };
        let view = order_from_item(&old)?;
        if view.order_id != current.order_id {
            return Err(StoreError::Malformed("the user's order changed under a cancellation".into()));
        }
        Ok(match (view.status, view.checked_in_at.clone()) {
            (OrderStatus::Cancelled, _) => Cancellation::AlreadyCancelled(view),
            (_, Some(at)) => Cancellation::CheckedIn { at },
            (status, None) => Cancellation::NotCancellable(status),
        })
    }

    /// The user's order item as stored, read consistently (a cancellation decides on it).
    pub async fn order_record(&self, event: &EventId, user: &UserId) -> Result<Option<Item>, StoreError> {
        self.order_item_of(event, user, true).await
    }

    /// The user's durable order, read consistently.
    pub async fn get_order_now(&self, event: &EventId, user: &UserId) -> Result<Option<OrderView>, StoreError> {
        self.order_record(event, user).await?.map(|item| order_from_item(&item)).transpose()
    }

    /// Cancelled orders whose numbers Redis has not taken back yet (a crash, a lost cache).
    pub async fn give_backs_due(&self, event: &EventId) -> Result<Vec<GiveBackDue>, StoreError> {
        let malformed = |e: &dyn std::fmt::Display| StoreError::Malformed(e.to_string());
        self.partition(key::give_back_marker(event), None)
            .await?
            .iter()
            .map(|item| {
                let cancelled_at = get_s(item, "cancelled_at")?;
                Ok(GiveBackDue {
                    user: UserId::parse(&get_s(item, "user_id")?).map_err(|e| malformed(&e))?,
                    order_id: OrderId::parse(&get_s(item, "order_id")?).map_err(|e| malformed(&e))?,
                    ticket_no: get_n(item, "ticket_no")?,
                    cancelled_at: OffsetDateTime::parse(&cancelled_at, &time::format_description::well_known::Rfc3339)
                        .map_err(|e| malformed(&e))?,
                })
            })
            .collect()
    }

    /// Redis has the number back: the marker goes.
    pub async fn give_back_done(&self, event: &EventId, order_id: &OrderId) -> Result<(), StoreError> {
        self.client
            .delete_item()
            .table_name(&self.table)
            .key(attr::PK, s(key::give_back_marker(event)))
            .key(attr::SK, s(format!("{}{order_id}", key::RETURN_SK_PREFIX)))
            .send()
            .await?;
        Ok(())
    }
}
