//! DynamoDB, the source of truth: one table, no hot key (DESIGN.md section 8).
//!
//! | item   | PK                  | SK       | indexes                                                  |
//! |--------|---------------------|----------|----------------------------------------------------------|
//! | event  | `EVENT#<E>`         | `META`   | GSI1 `EVENTS` / `<sale_start>#<E>` (the event list)       |
//! | order  | `ORDER#<E>#<user>`  | `ORDER`  | GSI1 `USER#<u>` / `EVENT#<E>`; GSI2 `EVENT#<E>#<n%16>` / n |
//! | ticket | `TICKET#<E>#<n>`    | `TICKET` |                                                          |

pub mod codec;
pub mod orders;
pub mod schema;

use std::collections::HashMap;

use aws_sdk_dynamodb::{Client, types::AttributeValue};
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};

use crate::domain::{Buyer, Event, EventId, Holdings, OrderStatus, UserId, event::rfc3339, order::OrderView};
use codec::{Item, event_from_item, event_item, order_from_item};
use schema::{GSI1, GSI2, GSI2_SHARDS, attr};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("dynamodb: {0}")]
    Dynamo(String),
    #[error("stored item is malformed: {0}")]
    Malformed(String),
}

impl<E> From<aws_sdk_dynamodb::error::SdkError<E>> for StoreError
where
    E: std::error::Error + aws_sdk_dynamodb::error::ProvideErrorMetadata + Send + Sync + 'static,
{
    fn from(e: aws_sdk_dynamodb::error::SdkError<E>) -> Self {
        Self::Dynamo(crate::aws::error_summary(&e))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PutEventError {
    #[error("an event with this id exists")]
    Exists,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An event as stored, with the `remaining` snapshot that serves reads while Redis is down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    pub event: Event,
    pub remaining_snapshot: u32,
}

/// One page of a listing and where the next one starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next: Option<String>,
}

#[derive(Debug, thiserror::Error)]
#[error("the cursor is not one this API issued")]
pub struct BadCursor;

/// Why a page of the event list could not be had: a cursor this API did not issue (the caller's
/// fault), or the store.
#[derive(Debug, thiserror::Error)]
pub enum ListError {
    #[error(transparent)]
    BadCursor(#[from] BadCursor),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl<E> From<aws_sdk_dynamodb::error::SdkError<E>> for ListError
where
    E: std::error::Error + aws_sdk_dynamodb::error::ProvideErrorMetadata + Send + Sync + 'static,
{
    fn from(e: aws_sdk_dynamodb::error::SdkError<E>) -> Self {
        Self::Store(e.into())
    }
}

#[derive(Clone)]
pub struct Store {
    client: Client,
    table: String,
}

impl Store {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self { client, table: table.into() }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    /// Stores a new event; an id already taken is `Exists` and nothing is overwritten.
    pub async fn put_event(&self, event: &Event) -> Result<(), PutEventError> {
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(event_item(event)))
            .condition_expression("attribute_not_exists(PK)")
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_conditional_check_failed_exception()) => {
                Err(PutEventError::Exists)
            }
            Err(e) => Err(StoreError::from(e).into()),
        }
    }

    pub async fn get_event(&self, id: &EventId) -> Result<Option<StoredEvent>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(attr::PK, s(format!("EVENT#{id}")))
            .key(attr::SK, s("META"))
            .send()
            .await?;
        out.item.map(|item| event_from_item(&item)).transpose()
    }

    /// Events, the latest sale first.
    pub async fn list_events(&self, limit: i32, cursor: Option<&str>) -> Result<Page<StoredEvent>, ListError> {
        let start = cursor.map(decode_event_cursor).transpose()?;
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(GSI1)
            .key_condition_expression("#pk = :events")
            .expression_attribute_names("#pk", attr::GSI1PK)
            .expression_attribute_values(":events", s(schema::EVENTS_PARTITION))
            .scan_index_forward(false)
            .limit(limit)
            .set_exclusive_start_key(start)
            .send()
            .await?;
        let items = out.items().iter().map(event_from_item).collect::<Result<Vec<_>, _>>()?;
        let next = out.last_evaluated_key().and_then(|k| match k.get(attr::GSI1SK) {
            Some(AttributeValue::S(sk)) => Some(URL_SAFE_NO_PAD.encode(sk)),
            _ => None,
        });
        Ok(Page { items, next })
    }

    /// The durable order of one user for one event.
    pub async fn get_order(&self, event: &EventId, user: &UserId) -> Result<Option<OrderView>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(attr::PK, s(format!("ORDER#{event}#{user}")))
            .key(attr::SK, s("ORDER"))
            .send()
            .await?;
        out.item.map(|item| order_from_item(&item)).transpose()
    }

    /// The attendee list: durable orders by ticket number, `limit` at a time after `after_ticket`.
    /// Orders are spread over [`GSI2_SHARDS`] partitions; each page reads every shard from the
    /// cursor on and merges, so the cursor is just the last ticket number shown.
    pub async fn list_orders(
        &self,
        event: &EventId,
        after_ticket: u32,
        limit: usize,
    ) -> Result<Page<AttendeeRow>, StoreError> {
        let queries = (0..GSI2_SHARDS).map(|shard| {
            self.client
                .query()
                .table_name(&self.table)
                .index_name(GSI2)
                .key_condition_expression("#pk = :shard AND #sk > :after")
                .expression_attribute_names("#pk", attr::GSI2PK)
                .expression_attribute_names("#sk", attr::GSI2SK)
                .expression_attribute_values(":shard", s(format!("EVENT#{event}#{shard}")))
                .expression_attribute_values(":after", AttributeValue::N(after_ticket.to_string()))
                .limit(limit as i32 + 1)
                .send()
        });
        let mut rows = Vec::new();
        for out in futures::future::join_all(queries).await {
            for item in out?.items() {
                rows.push(AttendeeRow::from_item(item)?);
            }
        }
        rows.sort_by_key(|r| r.ticket_no);
        let more = rows.len() > limit;
        rows.truncate(limit);
        let next = if more { rows.last().map(|r| r.ticket_no.to_string()) } else { None };
        Ok(Page { items: rows, next })
    }
}

impl Store {
    /// Every stored order of an event, for rebuilding a lost cache: buyers (confirmed and rejected)
    /// and the ticket numbers confirmed orders hold. Reads every GSI2 shard to its end.
    pub async fn holdings(&self, event: &EventId) -> Result<Holdings, StoreError> {
        let mut partitions: Vec<String> = (0..GSI2_SHARDS).map(|shard| format!("EVENT#{event}#{shard}")).collect();
        partitions.push(orders::rejected_partition(event.as_str()));
        let reads = partitions.into_iter().map(|partition| async move {
            let mut items = Vec::new();
            let mut start = None;
            loop {
                let out = self
                    .client
                    .query()
                    .table_name(&self.table)
                    .index_name(GSI2)
                    .key_condition_expression("#pk = :p")
                    .expression_attribute_names("#pk", attr::GSI2PK)
                    .expression_attribute_values(":p", s(partition.clone()))
                    .set_exclusive_start_key(start)
                    .send()
                    .await?;
                items.extend(out.items().iter().cloned());
                start = out.last_evaluated_key;
                if start.is_none() {
                    return Ok::<_, StoreError>(items);
                }
            }
        });
        let mut holdings = Holdings::default();
        for items in futures::future::try_join_all(reads).await? {
            for item in items {
                let order = order_from_item(&item)?;
                let user = UserId::parse(&codec::get_s(&item, "user_id")?)
                    .map_err(|e| StoreError::Malformed(e.to_string()))?;
                holdings.buyers.push(Buyer { user, order: order.order_id, ticket_no: order.ticket_no });
                if order.status == OrderStatus::Confirmed {
                    holdings.held.insert(order.ticket_no);
                }
            }
        }
        Ok(holdings)
    }

    /// Refreshes the event's `remaining` snapshot, served while Redis cannot answer.
    pub async fn set_remaining(&self, event: &EventId, remaining: u32) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .key(attr::PK, s(format!("EVENT#{event}")))
            .key(attr::SK, s("META"))
            .update_expression("SET remaining = :r")
            .condition_expression("attribute_exists(PK)")
            .expression_attribute_values(":r", AttributeValue::N(remaining.to_string()))
            .send()
            .await?;
        Ok(())
    }

    /// Every event, page by page to the end (reconcile's walk).
    pub async fn all_events(&self) -> Result<Vec<StoredEvent>, StoreError> {
        let mut events = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = self.list_events(100, cursor.as_deref()).await.map_err(|e| match e {
                ListError::Store(e) => e,
                ListError::BadCursor(e) => StoreError::Malformed(e.to_string()),
            })?;
            events.extend(page.items);
            match page.next {
                Some(next) => cursor = Some(next),
                None => return Ok(events),
            }
        }
    }
}

/// One line of the attendee list. The e-mail is included: the organiser needs it at the door.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AttendeeRow {
    pub ticket_no: u32,
    pub order_id: String,
    pub user_id: String,
    pub email: String,
    pub status: OrderStatus,
    pub created_at: String,
    /// When the order became durable (`CONFIRMED`).
    pub confirmed_at: Option<String>,
    /// Where its confirmation mail stands (`PENDING`, `SENDING`, `SENT`), and when it was sent.
    pub mail_status: Option<String>,
    pub mailed_at: Option<String>,
}

impl AttendeeRow {
    fn from_item(item: &Item) -> Result<Self, StoreError> {
        let view = order_from_item(item)?;
        Ok(Self {
            ticket_no: view.ticket_no,
            order_id: view.order_id.to_string(),
            user_id: codec::get_s(item, "user_id")?,
            email: codec::get_s(item, "email")?,
            status: view.status,
            created_at: codec::get_s(item, "created_at")?,
            confirmed_at: codec::opt_s(item, "stored_at"),
            mail_status: codec::opt_s(item, "mail_status"),
            mailed_at: codec::opt_s(item, "mail_sent_at"),
        })
    }
}

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn decode_event_cursor(cursor: &str) -> Result<HashMap<String, AttributeValue>, BadCursor> {
    let sk = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| BadCursor)?;
    let sk = String::from_utf8(sk).map_err(|_| BadCursor)?;
    let (_, id) = sk.rsplit_once('#').ok_or(BadCursor)?;
    let id = EventId::parse(id).map_err(|_| BadCursor)?;
    Ok(HashMap::from([
        (attr::PK.to_owned(), s(format!("EVENT#{id}"))),
        (attr::SK.to_owned(), s("META")),
        (attr::GSI1PK.to_owned(), s(schema::EVENTS_PARTITION)),
        (attr::GSI1SK.to_owned(), s(sk)),
    ]))
}

/// The event list's sort key: sale start, then id, so equal starts stay distinct.
pub(crate) fn event_list_key(event: &Event) -> String {
    format!("{}#{}", rfc3339(event.sale_start), event.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2_000))]
        /// Any cursor: refused, or the key of an event with a valid id; a cursor this API issued
        /// always reads back.
        #[test]
        fn any_cursor_is_refused_or_names_a_valid_event(cursor in "\\PC{0,80}|[A-Za-z0-9_-]{0,80}", id in "[A-Za-z0-9_-]{1,64}") {
            if let Ok(key) = decode_event_cursor(&cursor) {
                let pk = key[attr::PK].as_s().unwrap();
                proptest::prop_assert!(EventId::parse(pk.trim_start_matches("EVENT#")).is_ok());
            }
            let issued = URL_SAFE_NO_PAD.encode(format!("2026-12-01T09:00:00Z#{id}"));
            proptest::prop_assert!(decode_event_cursor(&issued).is_ok());
        }
    }
}
