//! query: the read side. Events with their live stock (from Redis; the DynamoDB snapshot when
//! Redis cannot answer), a user's own order, the public key that checks ticket passes, and for
//! admins the attendee list and the audit report.

use lambda_http::{Body, Request, Response, http::StatusCode};
use serde::Serialize;

use crate::{
    config::{PassKeyRingSource, UserLimits},
    domain::{
        Event, EventId, OrderStatus,
        audit::{Report, csv_cell},
        order::OrderView,
    },
    gate::Gate,
    handlers::{
        draws::published_draw::DrawView,
        live::{Auditor, DEFAULT_MINUTES, Live, MAX_MINUTES},
    },
    http::{
        ApiError, Caller, json,
        reply::{endpoint, event_id, query_param},
        routes::Endpoint,
        serve,
    },
    recovery::{Rebuild, Rebuilder},
    setup::Adapters,
    store::{AttendeeRow, Store, StoredEvent},
};

/// The state object's lifetime in a cache: a second, so a sell-out (or a number given back) shows
/// at the edge within about one (docs/SCALE.md's model, `Edge::ttl_ms`).
pub const STATE_CACHE_CONTROL: &str = "public, max-age=1";

const DEFAULT_PAGE: usize = 50;
const MAX_PAGE: usize = 500;

#[derive(Clone)]
pub struct Query {
    store: Store,
    gate: Gate,
    rebuilder: Rebuilder,
    limiter: super::limit::Limiter,
    pass: PassKeyRingSource,
    auditor: Auditor,
    live: Live,
    /// Red-packet amounts of orders, each event's split computed once.
    splits: crate::amounts::Splits,
    /// Ballots' entries and published draws.
    draws: DrawView,
}

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
    /// `stuck_after`: how long an order may wait to be stored, nothing stored meanwhile, before the
    /// audit fails (`ORDER_STUCK_AFTER_SECONDS`).
    pub fn new(
        store: Store,
        gate: Gate,
        rebuilder: Rebuilder,
        limits: UserLimits,
        pass: PassKeyRingSource,
        stuck_after: std::time::Duration,
    ) -> Self {
        let limiter = super::limit::Limiter::new(gate.clone(), limits);
        let draws = DrawView::new(store.clone(), rebuilder.clone());
        let auditor = Auditor::new(store.clone(), gate.clone(), draws.clone(), stuck_after, rebuilder.queue_name());
        let live = Live::new(gate.clone(), auditor.clone(), Some(rebuilder.clone()));
        Self { store, gate, rebuilder, limiter, pass, auditor, live, splits: Default::default(), draws }
    }

    pub async fn from_env() -> Result<Self, super::StartError> {
        let adapters = Adapters::from_env().await;
        let store = adapters.store_from_env()?;
        let gate = adapters.gate_from_env().await?;
        let rebuilder = adapters.rebuilder_from_env(&store, &gate)?;
        let pass = PassKeyRingSource::deployment(adapters.sdk().clone())?;
        Ok(Self::new(
            store,
            gate,
            rebuilder,
            UserLimits::from_env(crate::http::routes::per_user_limits())?,
            pass,
            crate::config::order_stuck_after()?,
        ))
    }

    pub async fn handle(&self, req: Request) -> Response<Body> {
        serve("query", req, |req| async move {
            // The one public route: no caller, nothing of a user's, a reply the edge may cache.
            if endpoint(&req) == Some(Endpoint::State) {
                return Ok((self.state(&event_id(&req)?).await?, "OK"));
            }
            let caller = Caller::from_request(&req)?;
            self.limiter.admit(&req, &caller).await?;
            let reply = match endpoint(&req) {
                Some(Endpoint::Events) => json(StatusCode::OK, &self.list_events(&req).await?),
                Some(Endpoint::Event) => json(StatusCode::OK, &self.event(&event_id(&req)?).await?),
                Some(Endpoint::Order) => json(StatusCode::OK, &self.order(&event_id(&req)?, &caller).await?),
                Some(Endpoint::Attendees) => {
                    if !caller.admin {
                        return Err(ApiError::Forbidden);
                    }
                    json(StatusCode::OK, &self.attendees(&req, &event_id(&req)?).await?)
                }
                Some(Endpoint::PassKey) => {
                    let event = event_id(&req)?;
                    self.rebuilder.event(&event).await?.ok_or(ApiError::EventNotFound)?;
                    let keys = self.pass.get().await.map_err(|e| {
                        tracing::error!(dependency = "secretsmanager", error = %e, "pass keys unavailable");
                        ApiError::Busy
                    })?;
                    let published = |k: &crate::domain::ticket_pass::PublicPassKey| {
                        serde_json::json!({ "key_id": k.id(), "public_key": k.encoded() })
                    };
                    json(
                        StatusCode::OK,
                        &serde_json::json!({
                            "event_id": event,
                            "algorithm": "Ed25519",
                            "key_id": keys.current.id(),
                            "public_key": keys.current.encoded(),
                            "next": keys.next.as_ref().map(published),
                            "previous": keys.previous.as_ref().map(published),
                            "format": "TP2.<base64url payload {k,e,o,n}>.<base64url signature over \"ticket-pass-v2\\n\" + payload>; k names the key",
                        }),
                    )
                }
                Some(Endpoint::Report) => {
                    if !caller.admin {
                        return Err(ApiError::Forbidden);
                    }
                    let event = event_id(&req)?;
                    // A malformed cursor is refused whatever the format (JSON has no pages).
                    let after = cursor(&req)?;
                    match query_param(&req, "format") {
                        None | Some("json") => json(StatusCode::OK, &self.report(&event).await?),
                        Some("csv") => self.attendees_csv(&event, after).await?,
                        Some(_) => return Err(ApiError::BadRequest("format must be json or csv".into())),
                    }
                }
                Some(Endpoint::Live) => {
                    if !caller.admin {
                        return Err(ApiError::Forbidden);
                    }
                    let event = event_id(&req)?;
                    let minutes = minutes(&req)?;
                    let known = self.rebuilder.event(&event).await?.ok_or(ApiError::EventNotFound)?;
                    json(StatusCode::OK, &self.live.view(&known, minutes).await?)
                }
                Some(Endpoint::Entry) => json(StatusCode::OK, &self.draws.entry(&event_id(&req)?, &caller).await?),
                Some(Endpoint::PublishedDraw) => {
                    let from = match query_param(&req, "from") {
                        None => 0,
                        Some(v) => v.parse::<usize>().map_err(|_| {
                            ApiError::BadRequest("from must be a place's index, a whole number from 0".into())
                        })?,
                    };
                    json(StatusCode::OK, &self.draws.published(&event_id(&req)?).await?.page(from))
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

    async fn list_events(&self, req: &Request) -> Result<EventPage, ApiError> {
        let limit = page_size(req)?;
        let page = self.store.list_events(limit as i32, query_param(req, "cursor")).await?;
        Ok(EventPage { events: self.with_stock(page.items).await, next_cursor: page.next })
    }

    /// The sale's state for anyone, cached a second by the edge (`STATE_MAX_AGE`): a crowd that
    /// reads "sold out" or "not started" there asks nothing of the functions.
    async fn state(&self, id: &EventId) -> Result<Response<Body>, ApiError> {
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

    async fn event(&self, id: &EventId) -> Result<EventWithStock, ApiError> {
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

    /// The caller's order: durable status from DynamoDB, else `PENDING` while the cache holds a
    /// grab not yet persisted.
    async fn order(&self, event: &EventId, caller: &Caller) -> Result<OrderView, ApiError> {
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

    async fn attendees(&self, req: &Request, event: &EventId) -> Result<AttendeePage, ApiError> {
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

impl Query {
    /// The organiser's audit of the event (`handlers::live::Auditor`).
    async fn report(&self, event: &EventId) -> Result<Report, ApiError> {
        let stored = self.store.get_event(event).await?.ok_or(ApiError::EventNotFound)?;
        self.auditor.report(&stored.event).await
    }

    /// The attendee list (confirmed orders) as CSV, for the organiser's spreadsheet: at most
    /// [`CSV_PAGE`] rows and [`CSV_PAGE_BYTES`] a page (Lambda's response limit is 6 MB), each page a
    /// CSV with its header, the next page's address in a `Link: <...>; rel="next"` header
    /// (RFC 8288) while there is one.
    /// The page after ticket `after` (0: the first).
    async fn attendees_csv(&self, event: &EventId, after: u32) -> Result<Response<Body>, ApiError> {
        self.rebuilder.event(event).await?.ok_or(ApiError::EventNotFound)?;
        let page = self.store.list_orders(event, after, CSV_PAGE).await?;
        let mut csv = String::from(
            "ticket_no,order_id,user_id,email,created_at,confirmed_at,mail_status,promoted,checked_in_at\r\n",
        );
        let mut next = page.next;
        for r in page.items {
            // Long addresses make long rows: the page ends early rather than pass the limit.
            if csv.len() >= CSV_PAGE_BYTES {
                next = Some(last_row_ticket(&csv).to_string());
                break;
            }
            let cells = [
                r.ticket_no.to_string(),
                r.order_id.to_string(),
                r.user_id.to_string(),
                r.email.to_string(),
                r.created_at,
                r.confirmed_at.unwrap_or_default(),
                r.mail_status.unwrap_or_default(),
                r.promoted.to_string(),
                r.checked_in_at.unwrap_or_default(),
            ];
            csv.push_str(&cells.iter().map(|c| csv_cell(c)).collect::<Vec<_>>().join(","));
            csv.push_str("\r\n");
        }
        let first = after == 0;
        let name =
            if first { format!("{event}-attendees.csv") } else { format!("{event}-attendees-after-{after}.csv") };
        let mut reply = Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "text/csv; charset=utf-8")
            .header("content-disposition", format!("attachment; filename=\"{name}\""))
            .header("cache-control", "no-store");
        if let Some(next) = next {
            reply =
                reply.header("link", format!("</admin/events/{event}/report?format=csv&cursor={next}>; rel=\"next\""));
        }
        Ok(reply.body(Body::Text(csv)).unwrap_or_default())
    }
}

/// Rows of one page of the CSV report: ~200 bytes a row, ~4 MB a page.
pub const CSV_PAGE: usize = 20_000;
/// A page stops growing past this many bytes (a row is at most ~1 KB), under Lambda's 6 MB.
pub const CSV_PAGE_BYTES: usize = 4 * 1024 * 1024;

/// The ticket number of the last row written (the CSV's rows begin with it).
fn last_row_ticket(csv: &str) -> u32 {
    let last = csv.trim_end().rsplit("\r\n").next().unwrap_or_default();
    last.split(',').next().and_then(|n| n.parse().ok()).unwrap_or(0)
}

/// The attendee list's cursor: the last ticket number of the page before (0: the first page),
/// written as openapi.yaml's `TicketCursor` says (no sign, no leading zero, at most 9 digits).
fn cursor(req: &Request) -> Result<u32, ApiError> {
    let Some(c) = query_param(req, "cursor") else { return Ok(0) };
    let digits = !c.is_empty() && c.len() <= 9 && c.bytes().all(|b| b.is_ascii_digit());
    match c.parse() {
        Ok(n) if digits && (c == "0" || !c.starts_with('0')) => Ok(n),
        _ => Err(ApiError::BadRequest("cursor must be a cursor this API issued".into())),
    }
}

/// The live view's window in minutes: 1 to [`MAX_MINUTES`], [`DEFAULT_MINUTES`] when not given.
fn minutes(req: &Request) -> Result<u32, ApiError> {
    let Some(m) = query_param(req, "minutes") else { return Ok(DEFAULT_MINUTES) };
    match m.parse::<u32>() {
        Ok(n) if (1..=MAX_MINUTES).contains(&n) && !m.starts_with(['0', '+']) => Ok(n),
        _ => Err(ApiError::BadRequest(format!("minutes must be a whole number from 1 to {MAX_MINUTES}"))),
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

#[cfg(test)]
mod tests {
    use lambda_http::RequestExt;

    use super::*;

    fn with_cursor(c: &str) -> Request {
        let query = std::collections::HashMap::from([("cursor".to_owned(), c.to_owned())]);
        Request::default().with_query_string_parameters(query)
    }

    #[test]
    fn a_ticket_cursor_is_read_as_openapi_writes_it() {
        assert_eq!(cursor(&Request::default()).unwrap(), 0);
        for (text, n) in [("0", 0), ("1", 1), ("20000", 20_000), ("999999999", 999_999_999)] {
            assert_eq!(cursor(&with_cursor(text)).unwrap(), n, "{text:?}");
        }
        for bad in ["", "00", "01", "+1", "-1", "1000000000", "x", " 1", "1.0"] {
            assert!(cursor(&with_cursor(bad)).is_err(), "{bad:?} accepted");
        }
    }
}
