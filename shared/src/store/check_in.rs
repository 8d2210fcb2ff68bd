//! Check-in at the door, in DynamoDB: the ticket item names the order, and one conditional write
//! on the order lets its holder in exactly once. A door that let a pass in offline syncs it later
//! with the time it did; when another door had checked the pass in first, the conflict is recorded
//! on the order.

use aws_sdk_dynamodb::{
    operation::update_item::UpdateItemError,
    types::{AttributeValue, ReturnValuesOnConditionCheckFailure},
};
use time::OffsetDateTime;

use super::{
    Store, StoreError,
    codec::{get_s, s},
    orders::{CHECK_IN_CONFLICTS, order_from_item},
    schema::{attr, key},
};
use crate::domain::{EventId, OrderId, OrderStatus, TicketNo, UserId, event::rfc3339};

/// When the door let the pass in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admitted {
    /// Now, online: the door waits for this answer.
    Now(OffsetDateTime),
    /// Earlier, at this time, by a door without the network, synced now.
    Offline(OffsetDateTime),
}

/// What a scan at the door found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckIn {
    /// Let in now.
    Admitted { at: String },
    /// Scanned before, at this time.
    AlreadyCheckedIn { at: String },
    /// A door let it in offline, and another door had checked it in before, at this time: the
    /// conflict is recorded on the order (the audit counts it).
    TwoDoors { at: String },
    /// The order was cancelled (or rejected): the pass is void.
    Void(OrderStatus),
    /// No such order for this user and event (a pass of another deployment, or a replaced order).
    Unknown,
}

impl Store {
    /// Checks in the ticket a pass names (event, number, order): its ticket item, read
    /// consistently, must name that order (else the order was cancelled and the number passed on,
    /// or freed), and tells whose order it is; then [`Self::check_in`].
    pub async fn check_in_ticket(
        &self,
        event: &EventId,
        ticket_no: TicketNo,
        order_id: &OrderId,
        admitted: Admitted,
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
        let (at, offline) = match admitted {
            Admitted::Now(at) => (at, false),
            Admitted::Offline(at) => (at, true),
        };
        match self.check_in(event, &user, order_id, at).await? {
            // The same scan synced again (its reply was lost) finds its own time: no conflict.
            CheckIn::AlreadyCheckedIn { at: first } if offline && first != rfc3339(at) => {
                self.record_two_doors(event, &user, order_id, &rfc3339(at)).await?;
                Ok(CheckIn::TwoDoors { at: first })
            }
            other => Ok(other),
        }
    }

    /// Adds an offline admission to the order's conflicts (a set: a retried sync adds nothing).
    async fn record_two_doors(
        &self,
        event: &EventId,
        user: &UserId,
        order_id: &OrderId,
        offline_at: &str,
    ) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .key(attr::PK, s(key::order(event, user)))
            .key(attr::SK, s(key::ORDER_SK))
            .update_expression("ADD #conflicts :at")
            .condition_expression("order_id = :order")
            .expression_attribute_names("#conflicts", CHECK_IN_CONFLICTS)
            .expression_attribute_values(":at", AttributeValue::Ss(vec![offline_at.to_owned()]))
            .expression_attribute_values(":order", s(order_id))
            .send()
            .await?;
        Ok(())
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
}
