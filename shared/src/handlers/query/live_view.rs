//! `GET /admin/events/{id}/live`: the organiser's live view of a sale (section 12), read by
//! `handlers::live`.

use lambda_http::{Body, Request, Response, http::StatusCode};

use super::Query;
use crate::{
    handlers::live::{DEFAULT_MINUTES, MAX_MINUTES},
    http::{
        ApiError, Caller, json,
        reply::{event_id, query_param},
    },
};

impl Query {
    pub(super) async fn live_view(&self, req: &Request, caller: &Caller) -> Result<Response<Body>, ApiError> {
        if !caller.admin {
            return Err(ApiError::Forbidden);
        }
        let event = event_id(req)?;
        let minutes = minutes(req)?;
        let known = self.rebuilder.event(&event).await?.ok_or(ApiError::EventNotFound)?;
        Ok(json(StatusCode::OK, &self.live.view(&known, minutes).await?))
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
