//! query: the read side, a room per route. Events with their live stock (`events`: the list, one
//! event, and its public state), a user's own order (`order`), the public keys that check ticket
//! passes (`pass_key`), and for admins the attendee list (`attendees`), the audit report and its CSV
//! pages (`report`) and the live view (`live_view`); a ballot's entry and the published draw are
//! the draw's rooms (`handlers::draws`). This file builds the function and sends each route to its
//! room, after the caller's per-user limit.

mod attendees;
mod events;
mod live_view;
mod order;
mod pass_key;
mod report;

use lambda_http::{Body, Request, Response, http::StatusCode};

pub use events::{EventWithStock, STATE_CACHE_CONTROL, StockSource};
pub use report::{CSV_PAGE, CSV_PAGE_BYTES};

use crate::{
    config::{PassKeyRingSource, UserLimits},
    gate::Gate,
    handlers::{
        draws::published_draw::DrawView,
        live::{Auditor, Live},
    },
    http::{
        ApiError, Caller, json,
        reply::{endpoint, event_id, query_param},
        routes::Endpoint,
        serve,
    },
    recovery::Rebuilder,
    setup::Adapters,
    store::Store,
};

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
                Some(Endpoint::Attendees) => json(StatusCode::OK, &self.attendees(&req, &caller).await?),
                Some(Endpoint::PassKey) => self.pass_key(&event_id(&req)?).await?,
                Some(Endpoint::Report) => self.report(&req, &caller).await?,
                Some(Endpoint::Live) => self.live_view(&req, &caller).await?,
                Some(Endpoint::Entry) => json(StatusCode::OK, &self.draws.entry(&event_id(&req)?, &caller).await?),
                Some(Endpoint::PublishedDraw) => json(StatusCode::OK, &self.draws.page_of(&req).await?),
                _ => return Err(ApiError::RouteNotFound),
            };
            Ok((reply, "OK"))
        })
        .await
    }
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
