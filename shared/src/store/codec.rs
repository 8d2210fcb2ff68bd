//! Items to and from domain types.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use time::{OffsetDateTime, format_description::well_known::Rfc3339};

use super::{
    StoreError, StoredEvent, event_list_key,
    schema::{EVENTS_PARTITION, attr},
};
use crate::domain::{Event, EventId, OrderId, OrderStatus, event::rfc3339, order::OrderView};

pub type Item = HashMap<String, AttributeValue>;

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

pub fn get_s(item: &Item, name: &str) -> Result<String, StoreError> {
    match item.get(name) {
        Some(AttributeValue::S(v)) => Ok(v.clone()),
        _ => Err(StoreError::Malformed(format!("attribute {name} missing or not a string"))),
    }
}

pub fn opt_s(item: &Item, name: &str) -> Option<String> {
    match item.get(name) {
        Some(AttributeValue::S(v)) => Some(v.clone()),
        _ => None,
    }
}

pub fn get_n<T: std::str::FromStr>(item: &Item, name: &str) -> Result<T, StoreError> {
    match item.get(name) {
        Some(AttributeValue::N(v)) => v.parse().map_err(|_| StoreError::Malformed(format!("attribute {name} = {v}"))),
        _ => Err(StoreError::Malformed(format!("attribute {name} missing or not a number"))),
    }
}

fn get_time(item: &Item, name: &str) -> Result<OffsetDateTime, StoreError> {
    let v = get_s(item, name)?;
    OffsetDateTime::parse(&v, &Rfc3339).map_err(|_| StoreError::Malformed(format!("attribute {name} = {v}")))
}

pub fn event_item(event: &Event) -> Item {
    let mut item = HashMap::from([
        (attr::PK.to_owned(), s(format!("EVENT#{}", event.id))),
        (attr::SK.to_owned(), s("META")),
        (attr::GSI1PK.to_owned(), s(EVENTS_PARTITION)),
        (attr::GSI1SK.to_owned(), s(event_list_key(event))),
        ("event_id".to_owned(), s(event.id.as_str())),
        ("title".to_owned(), s(&event.title)),
        ("capacity".to_owned(), n(event.capacity)),
        ("sale_start".to_owned(), s(rfc3339(event.sale_start))),
        ("sale_end".to_owned(), s(rfc3339(event.sale_end))),
        ("created_at".to_owned(), s(rfc3339(event.created_at))),
        ("remaining".to_owned(), n(event.capacity)),
    ]);
    if let Some(v) = &event.venue {
        item.insert("venue".into(), s(v));
    }
    if let Some(v) = event.starts_at {
        item.insert("starts_at".into(), s(rfc3339(v)));
    }
    if let Some(v) = &event.description {
        item.insert("description".into(), s(v));
    }
    item
}

pub fn event_from_item(item: &Item) -> Result<StoredEvent, StoreError> {
    let id = get_s(item, "event_id")?;
    let event = Event {
        id: EventId::parse(&id).map_err(|e| StoreError::Malformed(e.to_string()))?,
        title: get_s(item, "title")?,
        capacity: get_n(item, "capacity")?,
        sale_start: get_time(item, "sale_start")?,
        sale_end: get_time(item, "sale_end")?,
        venue: opt_s(item, "venue"),
        starts_at: opt_s(item, "starts_at").and_then(|v| OffsetDateTime::parse(&v, &Rfc3339).ok()),
        description: opt_s(item, "description"),
        created_at: get_time(item, "created_at")?,
    };
    let remaining_snapshot = get_n(item, "remaining").unwrap_or(event.capacity);
    Ok(StoredEvent { event, remaining_snapshot })
}

pub fn order_from_item(item: &Item) -> Result<OrderView, StoreError> {
    let status = get_s(item, "status")?;
    Ok(OrderView {
        order_id: OrderId::parse(&get_s(item, "order_id")?).map_err(|e| StoreError::Malformed(e.to_string()))?,
        event_id: EventId::parse(&get_s(item, "event_id")?).map_err(|e| StoreError::Malformed(e.to_string()))?,
        ticket_no: get_n(item, "ticket_no")?,
        status: OrderStatus::parse(&status).ok_or_else(|| StoreError::Malformed(format!("status {status}")))?,
        reason: opt_s(item, "reason"),
    })
}
