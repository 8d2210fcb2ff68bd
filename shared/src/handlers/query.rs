//! query: the read side. Events with their live stock (from Redis; the DynamoDB snapshot when
//! Redis cannot answer), a user's own order, and the attendee list for admins.

use lambda_http::{Body, Request, Response, http::StatusCode};
use serde::Serialize;

use crate::{
    config::{GateSettings, QueueSettings, StoreSettings, UserLimit},
    domain::{Event, EventId, OrderId, OrderStatus, order::OrderView},
    gate::Gate,
    http::{
        ApiError, Caller, json,
        reply::{event_id, query_param, route_key},
        serve,
    },
    queue::OrderQueue,
    recovery::{Rebuild, Rebuilder},
    store::{AttendeeRow, Store, StoredEvent},
};

const DEFAULT_PAGE: usize = 50;
const MAX_PAGE: usize = 500;

#[derive(Clone)]
pub struct Query {
    store: Store,
    gate: Gate,
    rebuilder: Rebuilder,
    limit: UserLimit,
}

/// An event as the read routes show it: the event, and its stock with where the figure came from.
#[derive(Debug, Serialize)]
pub struct EventWithStock {
    #[serde(flatten)]
    pub event: Event,
    pub remaining: u32,
    pub remaining_source: StockSource,
}

#[derive(Debug, Serialize)]
struct EventPage {
    events: Vec<EventWithStock>,
    next_cursor: Option<String>,
}

#[derive(Debug, Serialize)]
struct AttendeePage {
    event_id: EventId,
    capacity: u32,
    orders: Vec<AttendeeRow>,
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
    pub fn new(store: Store, gate: Gate, rebuilder: Rebuilder, limit: UserLimit) -> Self {
        Self { store, gate, rebuilder, limit }
    }

    pub async fn from_env() -> Result<Self, super::StartError> {
        let store_settings = StoreSettings::from_env()?;
        let queue_settings = QueueSettings::from_env()?;
        let gate = Gate::new(&GateSettings::from_env()?)?;
        let sdk = crate::aws::sdk_config().await;
        let store = Store::new(aws_sdk_dynamodb::Client::new(&sdk), store_settings.table_name);
        let queue = OrderQueue::new(aws_sdk_sqs::Client::new(&sdk), queue_settings.orders_queue_url);
        let rebuilder = Rebuilder::new(store.clone(), gate.clone(), queue, crate::config::RebuildSettings::from_env()?);
        Ok(Self::new(store, gate, rebuilder, UserLimit::from_env()?))
    }

    pub async fn handle(&self, req: Request) -> Response<Body> {
        serve("query", req, |req| async move {
            let caller = Caller::from_request(&req)?;
            // Reads go on while Redis is down (the snapshot answers), so the limit fails open.
            match self.gate.count_request(&caller.user, "query", self.limit).await {
                Ok(Some(retry_after_ms)) => return Err(ApiError::RateLimited { retry_after_ms }),
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "redis unavailable; query served without its rate limit"),
            }
            let reply = match route_key(&req).as_str() {
                "GET /events" => json(StatusCode::OK, &self.list_events(&req).await?),
                "GET /events/{id}" => json(StatusCode::OK, &self.event(&event_id(&req)?).await?),
                "GET /events/{id}/order" => json(StatusCode::OK, &self.order(&event_id(&req)?, &caller).await?),
                "GET /admin/events/{id}/orders" => {
                    if !caller.admin {
                        return Err(ApiError::Forbidden);
                    }
                    json(StatusCode::OK, &self.attendees(&req, &event_id(&req)?).await?)
                }
                _ => return Err(ApiError::RouteNotFound),
            };
            Ok((reply, "OK"))
        })
        .await
    }

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
        events
            .into_iter()
            .zip(live)
            .map(|(stored, live)| {
                let (remaining, remaining_source) = match live {
                    Some(n) => (n, StockSource::Live),
                    None => (stored.remaining_snapshot, StockSource::Snapshot),
                };
                EventWithStock { event: stored.event, remaining, remaining_source }
            })
            .collect()
    }

    async fn list_events(&self, req: &Request) -> Result<EventPage, ApiError> {
        let limit = page_size(req)?;
        let page = self.store.list_events(limit as i32, query_param(req, "cursor")).await?;
        Ok(EventPage { events: self.with_stock(page.items).await, next_cursor: page.next })
    }

    async fn event(&self, id: &EventId) -> Result<EventWithStock, ApiError> {
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

    /// The caller's order: durable status from DynamoDB, else `PENDING` while the cache holds a
    /// grab not yet persisted.
    async fn order(&self, event: &EventId, caller: &Caller) -> Result<OrderView, ApiError> {
        if let Some(order) = self.store.get_order(event, &caller.user).await? {
            return Ok(order);
        }
        let (order_id, ticket_no) = self.gate.buyer(event, &caller.user).await?.ok_or(ApiError::NoOrder)?;
        let order_id = OrderId::parse(&order_id).map_err(|_| ApiError::NoOrder)?;
        Ok(OrderView { order_id, event_id: event.clone(), ticket_no, status: OrderStatus::Pending, reason: None })
    }

    async fn attendees(&self, req: &Request, event: &EventId) -> Result<AttendeePage, ApiError> {
        let limit = page_size(req)?;
        let after = match query_param(req, "cursor") {
            None => 0,
            Some(c) => c.parse().map_err(|_| ApiError::BadRequest("cursor must be a cursor this API issued".into()))?,
        };
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

fn page_size(req: &Request) -> Result<usize, ApiError> {
    match query_param(req, "limit") {
        None => Ok(DEFAULT_PAGE),
        Some(l) => match l.parse::<usize>() {
            Ok(n) if (1..=MAX_PAGE).contains(&n) => Ok(n),
            _ => Err(ApiError::BadRequest(format!("limit must be a number from 1 to {MAX_PAGE}"))),
        },
    }
}
