//! `GET /admin/events/{id}/orders`: the attendee list, a page at a time.

use lambda_http::Request;
use serde::Serialize;

use super::{Query, cursor, page_size};
use crate::{
    domain::EventId,
    http::{ApiError, Caller, reply::event_id},
    store::AttendeeRow,
};

#[derive(Debug, Serialize)]
pub(super) struct AttendeePage {
    event_id: EventId,
    capacity: u32,
    orders: Vec<AttendeeRow>,
    next_cursor: Option<String>,
}

impl Query {
    /// An organiser's page of the attendee list (confirmed orders), by ticket number.
    pub(super) async fn attendees(&self, req: &Request, caller: &Caller) -> Result<AttendeePage, ApiError> {
        if !caller.admin {
            return Err(ApiError::Forbidden);
        }
        let event = &event_id(req)?;
        let limit = page_size(req)?;
        let after = cursor(req)?;
        let stored = self.store.get_event(event).await?.ok_or(ApiError::EventNotFound)?;
        let page = self.store.list_orders(event, after, limit).await?;
        Ok(AttendeePage {
            event_id: event.clone(),
            capacity: stored.event.capacity,
            orders: page.items,
            next_cursor: page.next,
        })
    }
}
