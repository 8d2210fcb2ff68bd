//! `GET /events`, `GET /events/{id}` and `GET /events/{id}/state`: events with their live stock
//! (from Redis; the DynamoDB snapshot when Redis cannot answer), and the sale's state for anyone,
//! cached a second at the edge.

use lambda_http::{Body, Request, Response, http::StatusCode};
use serde::Serialize;

use super::{Query, page_size};
use crate::{
    domain::{Event, EventId},
    http::{ApiError, json, reply::query_param},
    recovery::Rebuild,
    store::StoredEvent,
};

/// The state object's lifetime in a cache: a second, so a sell-out (or a number given back) shows
/// at the edge within about one (docs/SCALE.md's model, `Edge::ttl_ms`).
pub const STATE_CACHE_CONTROL: &str = "public, max-age=1";

/// An event as the read routes show it: the event, and its stock with where the figure came from.
#[derive(Debug, Serialize)]
pub struct EventWithStock {
    #[serde(flatten)]
    pub event: Event,
    pub remaining: u32,
    pub remaining_source: StockSource,
    /// A red-packet event's seed, published once the sale has ended: with it anyone recomputes
    /// every amount and checks it against the commitment published at release.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub red_packet_seed: Option<String>,
}

#[derive(Debug, Serialize)]
pub(super) struct EventPage {
    events: Vec<EventWithStock>,
    next_cursor: Option<String>,
}

/// Where a `remaining` figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StockSource {
    Live,
    Snapshot,
}

impl Query {
    /// Live stock for the given events, falling back to each event's snapshot.
    async fn with_stock(&self, events: Vec<StoredEvent>) -> Vec<EventWithStock> {
        let ids: Vec<EventId> = events.iter().map(|e| e.event.id.clone()).collect();
        let live = match self.gate.stocks(&ids).await {
            Ok(live) => live,
            Err(e) => {
                tracing::warn!(error = %e, "redis unavailable; serving stock snapshots");
                vec![None; ids.len()]
            }
        };
        let now = time::OffsetDateTime::now_utc();
        events
            .into_iter()
            .zip(live)
            .map(|(stored, live)| {
                let (remaining, remaining_source) = match live {
                    Some(n) => (n, StockSource::Live),
                    None => (stored.remaining_snapshot, StockSource::Snapshot),
                };
                let red_packet_seed = match (&stored.event.red_packet, stored.event.sale_phase(now)) {
                    (Some(packet), crate::domain::event::SalePhase::Ended) => Some(packet.seed.to_hex()),
                    _ => None,
                };
                EventWithStock { event: stored.event, remaining, remaining_source, red_packet_seed }
            })
            .collect()
    }

    pub(super) async fn list_events(&self, req: &Request) -> Result<EventPage, ApiError> {
        let limit = page_size(req)?;
        let page = self.store.list_events(limit as i32, query_param(req, "cursor")).await?;
        Ok(EventPage { events: self.with_stock(page.items).await, next_cursor: page.next })
    }

    /// The sale's state for anyone, cached a second by the edge (`STATE_MAX_AGE`): a crowd that
    /// reads "sold out" or "not started" there asks nothing of the functions.
    pub(super) async fn state(&self, id: &EventId) -> Result<Response<Body>, ApiError> {
        let shown = self.event(id).await?;
        let event = &shown.event;
        let mut reply = json(
            StatusCode::OK,
            &serde_json::json!({
                "event_id": id,
                "state": event.sale_state(time::OffsetDateTime::now_utc(), shown.remaining),
                "sale_mode": event.sale_mode,
                "sale_start": crate::domain::event::rfc3339(event.sale_start),
                "sale_end": crate::domain::event::rfc3339(event.sale_end),
            }),
        );
        reply.headers_mut().insert("cache-control", STATE_CACHE_CONTROL.parse().expect("a header value"));
        Ok(reply)
    }

    pub(super) async fn event(&self, id: &EventId) -> Result<EventWithStock, ApiError> {
        // An unknown id is answered from memory (a miss is remembered briefly).
        self.rebuilder.event(id).await?.ok_or(ApiError::EventNotFound)?;
        let stored = self.store.get_event(id).await?.ok_or(ApiError::EventNotFound)?;
        // An event DynamoDB knows but Redis does not lost its cache: rebuild it once, best effort
        // (the snapshot answers meanwhile).
        if matches!(self.gate.stock(id).await, Ok(None)) {
            match self.rebuilder.rebuild(&stored.event).await {
                Ok(Rebuild::Done | Rebuild::Present | Rebuild::Busy | Rebuild::Ended) => {}
                Err(e) => tracing::warn!(event_id = %id, error = %e, "rebuild from query failed"),
            }
        }
        Ok(self.with_stock(vec![stored]).await.remove(0))
    }
}
