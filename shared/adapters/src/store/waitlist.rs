//! The waitlist in DynamoDB: one item per waiting user (`WAIT#<E>` / `USER#<u>`), written once per
//! join (conditioned, so a retry is not a second place), read back by a rebuild that lost the
//! cache, and closed after `cancel_until` with one notice per user who never got a ticket.
//!
//! An item stays `WAITING` when its user is promoted: a rebuild tells a waiting user from a
//! promoted one by their order. Closing moves `WAITING` to `CLOSED` (with `notice_status`
//! `PENDING -> SENDING -> SENT`, as an order's mail) or to `PROMOTED`; the notice sent, the address
//! is removed.

use aws_sdk_dynamodb::{
    operation::{put_item::PutItemError, update_item::UpdateItemError},
    types::AttributeValue,
};
use time::OffsetDateTime;

use super::{
    Store, StoreError,
    codec::{Item, get_s, n, opt_s, s},
    schema::{attr, key},
};
use domain::{Email, EventId, UserId, Waiter, event::epoch_ms, event::rfc3339};

/// Where a waiting user's item stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaiterStatus {
    Waiting,
    /// The waitlist closed with no ticket for them: their notice is claimed or sent.
    Closed,
    /// They got a ticket from the waitlist (known when it closed).
    Promoted,
}

impl WaiterStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Waiting => "WAITING",
            Self::Closed => "CLOSED",
            Self::Promoted => "PROMOTED",
        }
    }
}

/// A closing notice's claim, as an order's mail claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeClaim {
    Claimed,
    /// Sent before, or nothing to send (the user was promoted, or never closed).
    Done,
    /// Another delivery holds a fresh claim.
    InProgress,
}

fn waiter_key(event: &EventId, user: &UserId) -> [(String, AttributeValue); 2] {
    [(attr::PK.to_owned(), s(key::waitlist(event))), (attr::SK.to_owned(), s(key::waiter(user)))]
}

fn malformed(e: impl std::fmt::Display) -> StoreError {
    StoreError::Malformed(e.to_string())
}

fn waiter_from(item: &Item) -> Result<Waiter, StoreError> {
    let place = match item.get("place") {
        Some(AttributeValue::N(v)) => v.parse().map_err(malformed)?,
        _ => return Err(malformed("waiter place missing")),
    };
    let user = UserId::parse(&get_s(item, "user_id")?).map_err(malformed)?;
    let email = Email::parse(&get_s(item, "email")?).map_err(malformed)?;
    Ok(Waiter { user, email, place })
}

impl Store {
    /// Records a place on the waitlist, once: a second write for the same user (a retry, or a
    /// join after a rebuild) keeps the first.
    pub async fn add_waiter(&self, event: &EventId, waiter: &Waiter, now: OffsetDateTime) -> Result<(), StoreError> {
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(waiter_key(event, &waiter.user).into_iter().collect()))
            .item("event_id", s(event.as_str()))
            .item("user_id", s(waiter.user.as_str()))
            .item("email", s(waiter.email.as_str()))
            .item("place", n(waiter.place))
            .item("joined_at", s(rfc3339(now)))
            .item("status", s(WaiterStatus::Waiting.as_str()))
            .condition_expression("attribute_not_exists(#pk)")
            .expression_attribute_names("#pk", attr::PK)
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.as_service_error(), Some(PutItemError::ConditionalCheckFailedException(_))) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Whether `user` holds a `WAITING` place, read consistently: what a line that lacks them is
    /// checked against.
    pub async fn is_waiting(&self, event: &EventId, user: &UserId) -> Result<bool, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(waiter_key(event, user).into_iter().collect()))
            .consistent_read(true)
            .send()
            .await?;
        Ok(out.item.is_some_and(|item| get_s(&item, "status").is_ok_and(|s| s == WaiterStatus::Waiting.as_str())))
    }

    /// The places still `WAITING` (their users may hold an order meanwhile), by place, read
    /// consistently.
    pub async fn waiters(&self, event: &EventId) -> Result<Vec<Waiter>, StoreError> {
        let items = self.partition(key::waitlist(event), Some(WaiterStatus::Waiting.as_str())).await?;
        let mut all = items.iter().map(waiter_from).collect::<Result<Vec<_>, _>>()?;
        all.sort_by_key(|w: &Waiter| w.place);
        Ok(all)
    }

    /// Marks a `WAITING` place `PROMOTED` (its user got a ticket) and removes its address. False
    /// when it was moved before.
    pub async fn promoted_waiter(&self, event: &EventId, user: &UserId) -> Result<bool, StoreError> {
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(waiter_key(event, user).into_iter().collect()))
            .condition_expression("#status = :waiting")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":waiting", s(WaiterStatus::Waiting.as_str()))
            .expression_attribute_values(":to", s(WaiterStatus::Promoted.as_str()))
            .update_expression("SET #status = :to REMOVE email");
        match update.send().await {
            Ok(_) => Ok(true),
            Err(e) if matches!(e.as_service_error(), Some(UpdateItemError::ConditionalCheckFailedException(_))) => {
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Claims the closing notice of a place still waiting or closed (no notice yet, `PENDING`, or a
    /// `SENDING` claim gone stale); the place is `CLOSED` from then on. Reconcile sends notices
    /// only once the waitlist is closed in Redis and no promotion is on its way, so a place still
    /// `WAITING` here can no longer get a ticket.
    pub async fn claim_notice(
        &self,
        event: &EventId,
        user: &UserId,
        now: OffsetDateTime,
        stale_before: OffsetDateTime,
    ) -> Result<NoticeClaim, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(waiter_key(event, user).into_iter().collect()))
            .update_expression("SET #status = :closed, notice_status = :sending, notice_claimed_at = :now")
            .condition_expression(
                "(#status = :waiting OR #status = :closed) AND (attribute_not_exists(notice_status) OR \
                 notice_status = :pending OR (notice_status = :sending AND notice_claimed_at < :stale))",
            )
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":waiting", s(WaiterStatus::Waiting.as_str()))
            .expression_attribute_values(":closed", s(WaiterStatus::Closed.as_str()))
            .expression_attribute_values(":pending", s("PENDING"))
            .expression_attribute_values(":sending", s("SENDING"))
            .expression_attribute_values(":now", n(epoch_ms(now)))
            .expression_attribute_values(":stale", n(epoch_ms(stale_before)))
            .return_values_on_condition_check_failure(
                aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure::AllOld,
            )
            .send()
            .await;
        let err = match result {
            Ok(_) => return Ok(NoticeClaim::Claimed),
            Err(e) => e,
        };
        let Some(UpdateItemError::ConditionalCheckFailedException(failed)) = err.as_service_error() else {
            return Err(err.into());
        };
        Ok(match failed.item().and_then(|item| opt_s(item, "notice_status")).as_deref() {
            Some("SENDING") => NoticeClaim::InProgress,
            _ => NoticeClaim::Done,
        })
    }

    /// The notice went out: recorded, and the address removed (nothing more will be sent).
    pub async fn notice_sent(
        &self,
        event: &EventId,
        user: &UserId,
        message_id: &str,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(waiter_key(event, user).into_iter().collect()))
            .update_expression(
                "SET notice_status = :sent, notice_message_id = :id, notice_sent_at = :now REMOVE email, notice_claimed_at",
            )
            .condition_expression("notice_status = :sending")
            .expression_attribute_values(":sent", s("SENT"))
            .expression_attribute_values(":sending", s("SENDING"))
            .expression_attribute_values(":id", s(message_id))
            .expression_attribute_values(":now", s(rfc3339(now)))
            .send()
            .await?;
        Ok(())
    }

    /// A notice certainly not sent: the claim goes back at once.
    pub async fn release_notice(&self, event: &EventId, user: &UserId) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(waiter_key(event, user).into_iter().collect()))
            .update_expression("SET notice_status = :pending REMOVE notice_claimed_at")
            .condition_expression("notice_status = :sending")
            .expression_attribute_values(":pending", s("PENDING"))
            .expression_attribute_values(":sending", s("SENDING"))
            .send()
            .await?;
        Ok(())
    }
}
