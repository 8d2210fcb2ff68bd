//! The door, in the release function (the organiser's writes): `POST /admin/events/{id}/check-in`
//! with a ticket pass lets its ticket in exactly once. Admins and the `staff` group only.
//!
//! The pass's signature is checked first (no I/O for a forged one); then one conditional write on
//! the order marks it used, so two doors scanning one pass at once let one person in. A second scan
//! is `409 ALREADY_CHECKED_IN` with the first scan's time; a cancelled ticket's pass is refused.

use lambda_http::{Body, Request, Response, http::StatusCode};
use serde::Deserialize;
use serde_json::json;
use time::OffsetDateTime;

use crate::{
    domain::ticket_pass::PublicPassKey,
    http::{
        ApiError, Caller, json,
        reply::{event_id, json_body},
    },
    store::{Store, after_sale::CheckIn},
};

#[derive(Clone)]
pub struct Door {
    store: Store,
    pass: PublicPassKey,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckInBody {
    pass: String,
}

impl Door {
    pub fn new(store: Store, pass: PublicPassKey) -> Self {
        Self { store, pass }
    }

    pub async fn check_in(&self, req: Request) -> Result<(Response<Body>, &'static str), ApiError> {
        let caller = Caller::from_request(&req)?;
        if !(caller.admin || caller.staff) {
            return Err(ApiError::Forbidden);
        }
        let event = event_id(&req)?;
        let body: CheckInBody = json_body(&req)?;
        let pass = self.pass.verify(body.pass.trim()).map_err(|_| ApiError::BadPass)?;
        // A genuine pass of another event, shown at this event's door.
        if pass.event != event {
            return Err(ApiError::BadPass);
        }
        let now = OffsetDateTime::now_utc();
        match self.store.check_in(&event, &pass.user, pass.order.as_str(), now).await? {
            CheckIn::Admitted { at } => Ok((
                json(
                    StatusCode::OK,
                    &json!({ "order_id": pass.order, "ticket_no": pass.ticket_no, "checked_in_at": at }),
                ),
                "CHECKED_IN",
            )),
            CheckIn::AlreadyCheckedIn { at } => Err(ApiError::AlreadyCheckedIn { at }),
            CheckIn::Void(_) => Err(ApiError::TicketCancelled),
            // Signed by this deployment, but the order is not (or no longer) stored: refused
            // like a pass of no ticket.
            CheckIn::Unknown => Err(ApiError::BadPass),
        }
    }
}
