//! door: `POST /admin/events/{id}/check-in` with a ticket pass lets its ticket in exactly once. A
//! function of its own, holding only the public pass keys and the table's reads and check-in
//! writes: nothing here can sign a pass or release an event. Admins, the `staff` group, and the
//! event's own staff group (`staff-<event id>`) only, within the event's check-in window.
//!
//! The pass's signature is checked first (no I/O for a forged one); then the ticket item tells
//! whose order holds the number, and one conditional write on that order marks it used, so two
//! doors scanning one pass let one person in. A second scan is `409 ALREADY_CHECKED_IN` with the
//! first scan's time; a cancelled ticket's pass is refused.

use lambda_http::{Body, Request, Response, http::StatusCode};

use crate::domain::ticket_pass::BadPass;
use serde::Deserialize;
use serde_json::json;
use time::OffsetDateTime;

use crate::{
    adapters::Adapters,
    config::PassKeyRingSource,
    domain::{EventId, event::rfc3339},
    http::{
        ApiError, Caller, json,
        reply::{event_id, json_body},
        serve,
    },
    store::{
        EventBook, Store,
        check_in::{Admitted, CheckIn},
    },
};

#[derive(Clone)]
pub struct Door {
    store: Store,
    events: EventBook,
    keys: PassKeyRingSource,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckInBody {
    pass: String,
    /// A door without the network let the pass in at this time (RFC 3339) and syncs it now.
    #[serde(default)]
    admitted_offline_at: Option<String>,
}

/// How far ahead of the function's clock a door's offline time may be (its clock drifts).
const DOOR_CLOCK_SKEW: time::Duration = time::Duration::seconds(60);

impl Door {
    pub fn new(store: Store, keys: PassKeyRingSource) -> Self {
        Self { events: EventBook::new(store.clone()), store, keys }
    }

    pub async fn from_env() -> Result<Self, super::StartError> {
        let adapters = Adapters::from_env().await;
        let store = adapters.store_from_env()?;
        Ok(Self::new(store, PassKeyRingSource::deployment(adapters.sdk().clone())?))
    }

    pub async fn handle(&self, req: Request) -> Response<Body> {
        serve("door", req, |req| async move { self.check_in(req).await }).await
    }

    pub async fn check_in(&self, req: Request) -> Result<(Response<Body>, &'static str), ApiError> {
        let caller = Caller::from_request(&req)?;
        let event = event_id(&req)?;
        if !caller.staffs(&event) {
            return Err(ApiError::Forbidden);
        }
        let body: CheckInBody = json_body(&req)?;
        let keys = self.keys.get().await.map_err(|e| {
            tracing::error!(dependency = "secretsmanager", error = %e, "pass keys unavailable");
            ApiError::Busy
        })?;
        let pass = match keys.verify(body.pass.trim()) {
            // Signed with a key published since this environment read the ring.
            Err(BadPass::UnknownKey) => self
                .keys
                .reread()
                .await
                .map_err(|e| {
                    tracing::error!(dependency = "secretsmanager", error = %e, "pass keys unavailable");
                    ApiError::Busy
                })?
                .verify(body.pass.trim()),
            checked => checked,
        }
        .map_err(|_| ApiError::BadPass)?;
        // A genuine pass of another event, shown at this event's door.
        if pass.event != event {
            return Err(ApiError::BadPass);
        }
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
        // window closed still records who came in.
        let at = match admitted {
            Admitted::Now(at) | Admitted::Offline(at) => at,
        };
        self.within_window(&event, at).await?;
        match self.store.check_in_ticket(&event, pass.ticket_no, &pass.order, admitted).await? {
            CheckIn::Admitted { at } => Ok((
                json(
                    StatusCode::OK,
                    &json!({ "order_id": pass.order, "ticket_no": pass.ticket_no, "checked_in_at": at }),
                ),
                "CHECKED_IN",
            )),
            CheckIn::AlreadyCheckedIn { at } | CheckIn::TwoDoors { at } => Err(ApiError::AlreadyCheckedIn { at }),
            CheckIn::Void(_) => Err(ApiError::TicketCancelled),
            // Signed by this deployment, but the order is not (or no longer) stored: refused
            // like a pass of no ticket.
            CheckIn::Unknown => Err(ApiError::BadPass),
        }
    }

    async fn within_window(&self, event: &EventId, now: OffsetDateTime) -> Result<(), ApiError> {
        let event = self.events.get(event).await?.ok_or(ApiError::EventNotFound)?;
        let (from, until) = event.check_in_window();
        if now < from || until.is_some_and(|u| now >= u) {
            return Err(ApiError::CheckInClosed { from: rfc3339(from), until: until.map(rfc3339) });
        }
        Ok(())
    }
}
