//! door: `POST /admin/events/{id}/check-in` with a ticket pass lets its ticket in exactly once, and
//! `GET /admin/events/{id}/check-in` gives the door its figures (checked in of tickets) and finds a
//! holder by ticket number or order id. A function of its own, holding only the public pass keys
//! and the table's reads and check-in writes: nothing here can sign a pass or release an event.
//! Admins, the `staff` group, and the event's own staff group (`staff-<event id>`) only, within the
//! event's check-in window, each user limited per environment (the door holds no Redis).
//!
//! The pass's signature is checked first (no I/O for a forged one); then the ticket item tells
//! whose order holds the number, and one conditional write on that order marks it used, so two
//! doors scanning one pass let one person in. A second scan is `409 ALREADY_CHECKED_IN` with the
//! first scan's time; a cancelled ticket's pass is refused. A holder whose phone died is let in by
//! ticket number (`{"ticket_no": n}`), found first by the lookup: the staff's judgement stands in
//! for the signature. An offline door's time is refused when it cannot be: before the order
//! existed, or outside the door's window (`409 OFFLINE_TIME_REFUSED`).

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use lambda_http::{Body, Request, Response, http::StatusCode};

use crate::domain::ticket_pass::BadPass;
use serde::Deserialize;
use serde_json::json;
use time::OffsetDateTime;

use crate::{
    config::{PassKeyRingSource, UserLimits},
    domain::{DoorName, Event, EventId, OrderId, ScanId, TicketNo, event::rfc3339},
    http::{
        ApiError, Caller, json,
        reply::{endpoint, event_id, json_body, query_param},
        routes::Endpoint,
        serve,
    },
    setup::Adapters,
    store::{
        EventBook, Store,
        check_in::{Admitted, CheckIn, DOOR_CLOCK_SKEW, DoorCounts, Scanned},
    },
};

/// How old the door's figures may be: every door device asks about every 15 s, and each count
/// reads the whole attendee list (at 50,000 tickets, some 2,500 read units), so an environment
/// counts at most this often per event.
pub const COUNTS_EVERY: Duration = Duration::from_secs(10);

#[derive(Clone)]
pub struct Door {
    store: Store,
    events: EventBook,
    keys: PassKeyRingSource,
    limiter: super::limit::Limiter,
    /// Each event's figures, and when they were counted.
    counts: Arc<Mutex<Counted>>,
}

type Counted = std::collections::HashMap<EventId, (Instant, Arc<DoorCounts>)>;

/// A check-in: a scanned pass, or (a holder whose phone died) a ticket number staff looked up.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckInBody {
    #[serde(default)]
    pass: Option<String>,
    #[serde(default)]
    ticket_no: Option<TicketNo>,
    /// A door without the network let the pass in at this time (RFC 3339) and syncs it now.
    #[serde(default)]
    admitted_offline_at: Option<String>,
    /// The door's name, as its staff set it up ("Gate A"): the organiser counts check-ins by it.
    #[serde(default)]
    door: Option<DoorName>,
    /// The scan's own id, drawn by the door: the same scan sent again is answered as it was.
    #[serde(default)]
    scan: Option<ScanId>,
    /// With `ticket_no`: the order staff looked up and confirmed with the holder. A ticket held by
    /// another order since (cancelled, given to the next who waited) is not let in on that word.
    #[serde(default)]
    order_id: Option<OrderId>,
}

impl Door {
    pub fn new(store: Store, keys: PassKeyRingSource, limits: UserLimits) -> Self {
        Self {
            events: EventBook::new(store.clone()),
            store,
            keys,
            limiter: super::limit::Limiter::in_environment(limits),
            counts: Arc::default(),
        }
    }

    pub async fn from_env() -> Result<Self, super::StartError> {
        let adapters = Adapters::from_env().await;
        let store = adapters.store_from_env()?;
        let limits = UserLimits::from_env(crate::http::routes::per_user_limits())?;
        Ok(Self::new(store, PassKeyRingSource::deployment(adapters.sdk().clone())?, limits))
    }

    pub async fn handle(&self, req: Request) -> Response<Body> {
        serve("door", req, |req| async move {
            let caller = Caller::from_request(&req)?;
            let event = event_id(&req)?;
            if !caller.staffs(&event) {
                return Err(ApiError::Forbidden);
            }
            self.limiter.admit(&req, &caller).await?;
            match endpoint(&req) {
                Some(Endpoint::DoorDesk) => self.desk(&req, &event).await,
                _ => self.check_in(&req, &event).await,
            }
        })
        .await
    }

    /// The door's figures, and the holder asked for (`?ticket=` or `?order=`).
    async fn desk(&self, req: &Request, id: &EventId) -> Result<(Response<Body>, &'static str), ApiError> {
        let event = self.events.get(id).await?.ok_or(ApiError::EventNotFound)?;
        let ticket = query_param(req, "ticket")
            .map(|n| n.parse::<u32>().ok().filter(|n| *n >= 1).map(TicketNo::new))
            .map(|n| n.ok_or_else(|| ApiError::BadRequest("ticket must be a ticket number (1 or more)".into())))
            .transpose()?;
        let order = query_param(req, "order")
            .map(|o| OrderId::parse(o).map_err(|e| ApiError::BadRequest(e.to_string())))
            .transpose()?;
        if ticket.is_some() && order.is_some() {
            return Err(ApiError::BadRequest("ask by ticket or by order, not both".into()));
        }
        let counts = self.counts(&event.id).await?;
        let mut reply = desk_view(&event, &counts);
        if ticket.is_some() || order.is_some() {
            // A confirmed holder by number (the ticket item), or by order id (the figures' own
            // list: an order confirmed since they were counted is found by number, or at the next
            // count); else a ticket cancelled or rejected, which staff should hear of.
            let number = ticket.or_else(|| order.as_ref().and_then(|o| counts.numbers.get(o).copied()));
            let held = match number {
                Some(n) => self.store.holder(&event.id, n).await?,
                None => None,
            };
            let holder = match held {
                Some(holder) => holder,
                None => self
                    .store
                    .off_list_holder(&event.id, ticket, order.as_ref())
                    .await?
                    .ok_or(ApiError::TicketNotFound)?,
            };
            reply["holder"] = json!(holder);
        }
        Ok((json(StatusCode::OK, &reply), "OK"))
    }

    /// The event's figures, at most [`COUNTS_EVERY`] old.
    async fn counts(&self, event: &EventId) -> Result<Arc<DoorCounts>, ApiError> {
        if let Some((at, counts)) = self.counts.lock().unwrap_or_else(|p| p.into_inner()).get(event)
            && at.elapsed() < COUNTS_EVERY
        {
            return Ok(counts.clone());
        }
        let counted = Arc::new(self.store.door_counts(event).await?);
        let mut all = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        // Events of the past leave: the map holds the doors open now.
        all.retain(|_, (at, _)| at.elapsed() < COUNTS_EVERY * 30);
        all.insert(event.clone(), (Instant::now(), counted.clone()));
        Ok(counted)
    }

    async fn check_in(&self, req: &Request, event: &EventId) -> Result<(Response<Body>, &'static str), ApiError> {
        let body: CheckInBody = json_body(req)?;
        let (ticket_no, order_id) = match (body.pass.as_deref(), body.ticket_no) {
            (Some(pass), None) => {
                let pass = self.verified(pass).await?;
                // A genuine pass of another event, shown at this event's door.
                if pass.event != *event {
                    return Err(ApiError::BadPass);
                }
                (pass.ticket_no, pass.order)
            }
            // Let in by number: online only, the staff looked the holder up.
            (None, Some(n)) if body.admitted_offline_at.is_none() => {
                let (order, _) = self.store.ticket_holder(event, n).await?.ok_or(ApiError::TicketNotFound)?;
                (n, body.order_id.clone().unwrap_or(order))
            }
            _ => {
                return Err(ApiError::BadRequest(
                    "send a pass, or a ticket number alone (a number is let in online only)".into(),
                ));
            }
        };
        let now = OffsetDateTime::now_utc();
        let admitted = match body.admitted_offline_at.as_deref() {
            None => Admitted::Now(now),
            Some(at) => match OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339) {
                Ok(at) if at <= now + DOOR_CLOCK_SKEW => Admitted::Offline(at.to_offset(time::UtcOffset::UTC)),
                _ => {
                    return Err(ApiError::BadRequest(
                        "admitted_offline_at must be an RFC 3339 time, not in the future".into(),
                    ));
                }
            },
        };
        // An offline admission counts at the time it happened: a door that syncs after the
        // window closed still records who came in, but a time outside the window is refused.
        match admitted {
            Admitted::Now(at) => self.within_window(event, at, time::Duration::ZERO).await?,
            // The door's clock may be behind or ahead: its time is taken within the drift at
            // either edge (and stored as it gave it, so a retried sync finds its own time).
            Admitted::Offline(at) => self.within_window(event, at, DOOR_CLOCK_SKEW).await.map_err(|e| match e {
                ApiError::CheckInClosed { from, until } => ApiError::OfflineTimeRefused(format!(
                    "this door let the pass in at {}, outside the door's window (from {from}{})",
                    rfc3339(at),
                    until.map(|u| format!(" until {u}")).unwrap_or_default()
                )),
                other => other,
            })?,
        }
        let scanned = Scanned { door: body.door.as_ref(), scan: body.scan.as_ref() };
        match self.store.check_in_ticket(event, ticket_no, &order_id, admitted, scanned).await? {
            CheckIn::Admitted { at } => Ok((
                json(StatusCode::OK, &json!({ "order_id": order_id, "ticket_no": ticket_no, "checked_in_at": at })),
                "CHECKED_IN",
            )),
            CheckIn::AlreadyCheckedIn { at, door } | CheckIn::TwoDoors { at, door } => {
                Err(ApiError::AlreadyCheckedIn { at, door })
            }
            CheckIn::Void(_) => Err(ApiError::TicketCancelled),
            CheckIn::BeforeTheOrder { created_at } => Err(ApiError::OfflineTimeRefused(format!(
                "this door's time for the pass is before its order was made ({created_at})"
            ))),
            // Signed by this deployment, but the order is not (or no longer) stored: refused
            // like a pass of no ticket.
            CheckIn::Unknown => Err(ApiError::BadPass),
        }
    }

    /// The pass, its signature checked against the event's keys (read again once for a key
    /// published since this environment read the ring).
    async fn verified(&self, pass: &str) -> Result<crate::domain::ticket_pass::Pass, ApiError> {
        let keys = self.keys.get().await.map_err(|e| {
            tracing::error!(dependency = "secretsmanager", error = %e, "pass keys unavailable");
            ApiError::Busy
        })?;
        match keys.verify(pass.trim()) {
            // Signed with a key published since this environment read the ring.
            Err(BadPass::UnknownKey) => self
                .keys
                .reread()
                .await
                .map_err(|e| {
                    tracing::error!(dependency = "secretsmanager", error = %e, "pass keys unavailable");
                    ApiError::Busy
                })?
                .verify(pass.trim()),
            checked => checked,
        }
        .map_err(|_| ApiError::BadPass)
    }

    /// Whether `now` is in the event's check-in window, give or take `drift` at either edge.
    async fn within_window(&self, event: &EventId, now: OffsetDateTime, drift: time::Duration) -> Result<(), ApiError> {
        let event = self.events.get(event).await?.ok_or(ApiError::EventNotFound)?;
        let (from, until) = event.check_in_window();
        if now < from - drift || until.is_some_and(|u| now >= u + drift) {
            return Err(ApiError::CheckInClosed { from: rfc3339(from), until: until.map(rfc3339) });
        }
        Ok(())
    }
}

/// The door's summary: the event as the door shows it, and its figures.
fn desk_view(event: &Event, counts: &DoorCounts) -> serde_json::Value {
    let (from, until) = event.check_in_window();
    let mut view = json!({
        "event_id": event.id,
        "title": event.title,
        "check_in_from": rfc3339(from),
        "tickets": counts.tickets,
        "checked_in": counts.checked_in,
        "by_door": counts.by_door,
        "as_of": counts.counted_at.map(rfc3339),
    });
    if let Some(at) = event.starts_at {
        view["starts_at"] = json!(rfc3339(at));
    }
    if let Some(venue) = &event.venue {
        view["venue"] = json!(venue);
    }
    if let Some(until) = until {
        view["check_in_until"] = json!(rfc3339(until));
    }
    view
}
