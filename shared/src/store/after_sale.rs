//! After the grab, in DynamoDB: cancelling an order (one transaction that frees its ticket
//! number), the numbers still to be given back in Redis, check-in at the door, and every order of
//! an event for the organiser's report.

use aws_sdk_dynamodb::{
    operation::{transact_write_items::TransactWriteItemsError, update_item::UpdateItemError},
    types::{Delete, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update},
};
use time::OffsetDateTime;

use super::{
    Store, StoreError,
    codec::{Item, get_n, get_s, n, s},
    orders::{AttendeeRow, order_from_item},
    schema::{attr, key},
};
use crate::domain::{EventId, OrderId, OrderStatus, UserId, event::rfc3339, order::OrderView};

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
pub struct ReturnDue {
    pub user: UserId,
    pub order_id: OrderId,
    pub ticket_no: u32,
    /// When the order was cancelled: after the sale's end a number nobody waits for is held for
    /// the waitlist.
    pub cancelled_at: OffsetDateTime,
}

/// What a scan at the door found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckIn {
    /// Let in now.
    Admitted { at: String },
    /// Scanned before, at this time.
    AlreadyCheckedIn { at: String },
    /// The order was cancelled (or rejected): the pass is void.
    Void(OrderStatus),
    /// No such order for this user and event (a pass of another deployment, or a replaced order).
    Unknown,
}

fn update(u: Update) -> TransactWriteItem {
    TransactWriteItem::builder().update(u).build()
}

fn built<T, E: std::fmt::Display>(r: Result<T, E>) -> Result<T, StoreError> {
    r.map_err(|e| StoreError::Dynamo(e.to_string()))
}

impl Store {
    /// Cancels the user's order `order_id`, in one transaction: the order becomes `CANCELLED`
    /// (only while it is `CONFIRMED`, this order and not checked in), its ticket item is deleted
    /// (only while this order holds it), and a return marker records that Redis must take the
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
                .update_expression("SET #status = :cancelled, cancelled_at = :now, #gsi2pk = :off_list")
                .condition_expression(
                    "order_id = :order AND #status = :confirmed AND attribute_not_exists(checked_in_at)",
                )
                .expression_attribute_names("#status", "status")
                .expression_attribute_names("#gsi2pk", attr::GSI2PK)
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
                .item(attr::PK, s(key::returning(event)))
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
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(attr::PK, s(key::order(event, user)))
            .key(attr::SK, s(key::ORDER_SK))
            .consistent_read(true)
            .send()
            .await?;
        Ok(out.item)
    }

    /// The user's durable order, read consistently.
    pub async fn get_order_now(&self, event: &EventId, user: &UserId) -> Result<Option<OrderView>, StoreError> {
        self.order_record(event, user).await?.map(|item| order_from_item(&item)).transpose()
    }

    /// Cancelled orders whose numbers Redis has not taken back yet (a crash, a lost cache).
    pub async fn returns_due(&self, event: &EventId) -> Result<Vec<ReturnDue>, StoreError> {
        let mut due = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("#pk = :pk")
                .expression_attribute_names("#pk", attr::PK)
                .expression_attribute_values(":pk", s(key::returning(event)))
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await?;
            for item in out.items() {
                let malformed = |e: &dyn std::fmt::Display| StoreError::Malformed(e.to_string());
                let cancelled_at = get_s(item, "cancelled_at")?;
                due.push(ReturnDue {
                    user: UserId::parse(&get_s(item, "user_id")?).map_err(|e| malformed(&e))?,
                    order_id: OrderId::parse(&get_s(item, "order_id")?).map_err(|e| malformed(&e))?,
                    ticket_no: get_n(item, "ticket_no")?,
                    cancelled_at: OffsetDateTime::parse(&cancelled_at, &time::format_description::well_known::Rfc3339)
                        .map_err(|e| malformed(&e))?,
                });
            }
            start = out.last_evaluated_key;
            if start.is_none() {
                return Ok(due);
            }
        }
    }

    /// Redis has the number back: the marker goes.
    pub async fn return_done(&self, event: &EventId, order_id: &OrderId) -> Result<(), StoreError> {
        self.client
            .delete_item()
            .table_name(&self.table)
            .key(attr::PK, s(key::returning(event)))
            .key(attr::SK, s(format!("{}{order_id}", key::RETURN_SK_PREFIX)))
            .send()
            .await?;
        Ok(())
    }

    /// Checks in the ticket a pass names (event, number, order): its ticket item, read
    /// consistently, must name that order (else the order was cancelled and the number passed on,
    /// or freed), and tells whose order it is; then [`Self::check_in`].
    pub async fn check_in_ticket(
        &self,
        event: &EventId,
        ticket_no: u32,
        order_id: &OrderId,
        now: OffsetDateTime,
    ) -> Result<CheckIn, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(attr::PK, s(key::ticket(event, ticket_no)))
            .key(attr::SK, s(key::TICKET_SK))
            .consistent_read(true)
            .send()
            .await?;
        let Some(ticket) = out.item else { return Ok(CheckIn::Void(OrderStatus::Cancelled)) };
        if get_s(&ticket, "order_id")? != order_id.as_str() {
            return Ok(CheckIn::Void(OrderStatus::Cancelled));
        }
        let user = UserId::parse(&get_s(&ticket, "user_id")?).map_err(|e| StoreError::Malformed(e.to_string()))?;
        self.check_in(event, &user, order_id, now).await
    }

    /// Marks the ticket used, exactly once: a conditional write on the order, so two doors scanning
    /// the same pass let one person in.
    pub async fn check_in(
        &self,
        event: &EventId,
        user: &UserId,
        order_id: &OrderId,
        now: OffsetDateTime,
    ) -> Result<CheckIn, StoreError> {
        let at = rfc3339(now);
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(attr::PK, s(key::order(event, user)))
            .key(attr::SK, s(key::ORDER_SK))
            .update_expression("SET checked_in_at = :now")
            .condition_expression("order_id = :order AND #status = :confirmed AND attribute_not_exists(checked_in_at)")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":order", s(order_id))
            .expression_attribute_values(":confirmed", s(OrderStatus::Confirmed.as_str()))
            .expression_attribute_values(":now", s(&at))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        let err = match result {
            Ok(_) => return Ok(CheckIn::Admitted { at }),
            Err(e) => e,
        };
        let Some(UpdateItemError::ConditionalCheckFailedException(failed)) = err.as_service_error() else {
            return Err(err.into());
        };
        let old = match failed.item() {
            Some(item) => Some(item.clone()),
            None => self.order_record(event, user).await?,
        };
        let Some(old) = old else { return Ok(CheckIn::Unknown) };
        let view = order_from_item(&old)?;
        if view.order_id != *order_id {
            return Ok(CheckIn::Unknown);
        }
        Ok(match (view.status, view.checked_in_at) {
            (OrderStatus::Confirmed, Some(at)) => CheckIn::AlreadyCheckedIn { at },
            (status, _) => CheckIn::Void(status),
        })
    }

    /// Every ticket item of the event (number -> the order id it names), read consistently: the
    /// audit compares them with the orders. One batch read per 100 numbers of the capacity.
    pub async fn ticket_items(
        &self,
        event: &EventId,
        capacity: u32,
    ) -> Result<std::collections::HashMap<u32, String>, StoreError> {
        let numbers: Vec<u32> = (1..=capacity).collect();
        let batches: Vec<&[u32]> = numbers.chunks(100).collect();
        let mut tickets = std::collections::HashMap::new();
        // Eight batches at a time.
        for group in batches.chunks(8) {
            let found = futures::future::try_join_all(group.iter().map(|b| self.ticket_batch(event, b))).await?;
            tickets.extend(found.into_iter().flatten());
        }
        Ok(tickets)
    }

    async fn ticket_batch(&self, event: &EventId, numbers: &[u32]) -> Result<Vec<(u32, String)>, StoreError> {
        use aws_sdk_dynamodb::types::KeysAndAttributes;
        let mut keys: Vec<Item> = numbers
            .iter()
            .map(|n| {
                Item::from([(attr::PK.to_owned(), s(key::ticket(event, *n))), (attr::SK.to_owned(), s(key::TICKET_SK))])
            })
            .collect();
        let mut found = Vec::new();
        while !keys.is_empty() {
            let request = built(KeysAndAttributes::builder().set_keys(Some(keys)).consistent_read(true).build())?;
            let out = self.client.batch_get_item().request_items(&self.table, request).send().await?;
            for item in out.responses.as_ref().and_then(|r| r.get(&self.table)).into_iter().flatten() {
                let n: u32 = get_s(item, attr::PK)?
                    .rsplit('#')
                    .next()
                    .and_then(|n| n.parse().ok())
                    .ok_or_else(|| StoreError::Malformed("ticket key".into()))?;
                found.push((n, get_s(item, "order_id")?));
            }
            keys = out.unprocessed_keys.and_then(|mut u| u.remove(&self.table)).map(|k| k.keys).unwrap_or_default();
        }
        Ok(found)
    }

    /// The ids of every stored order of an event (reconcile's drift check).
    pub async fn order_ids(&self, event: &EventId) -> Result<std::collections::HashSet<String>, StoreError> {
        self.event_order_items(event).await?.iter().map(|item| get_s(item, "order_id")).collect()
    }

    /// Every stored order of an event (confirmed, rejected and cancelled), by ticket number: the
    /// organiser's report.
    pub async fn all_orders(&self, event: &EventId) -> Result<Vec<AttendeeRow>, StoreError> {
        let mut rows =
            self.event_order_items(event).await?.iter().map(AttendeeRow::from_item).collect::<Result<Vec<_>, _>>()?;
        rows.sort_by(|a, b| (a.ticket_no, &a.order_id).cmp(&(b.ticket_no, &b.order_id)));
        Ok(rows)
    }
}
