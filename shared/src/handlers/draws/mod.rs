//! The routes of the sales that draw (docs/DESIGN.md section 11), a room each. A ballot: a user
//! registers (`POST /events/{id}/entry`, in grab) and sees their entry (`GET /events/{id}/entry`,
//! in query): [`entry`]. A fair open: a user joins the queue and sees their place, with an
//! admission token once admitted (`POST`/`GET /events/{id}/queue`, in grab): [`queue`]. Both:
//! anyone reads the published draw (`GET /events/{id}/draw`, in query): [`published_draw`]; the
//! organiser draws (`POST /admin/events/{id}/draw`, in release): [`draw`]; and anyone reads the
//! keys that sign the entries' receipts and the draw's head (`GET /events/{id}/receipt-key`, in
//! grab): [`receipt_key`]. The organiser's draw and the published one make the same draw from the
//! same roll: `roll`.

pub mod draw;
pub mod entry;
pub mod published_draw;
pub mod queue;
pub mod receipt_key;
mod roll;

use crate::{
    domain::{Event, EventId, sale_mode::SaleMode},
    http::ApiError,
    recovery::Rebuilder,
};

/// The event, known and sold in `mode`.
async fn event_in(rebuilder: &Rebuilder, id: &EventId, mode: SaleMode) -> Result<Event, ApiError> {
    let event = rebuilder.event(id).await?.ok_or(ApiError::EventNotFound)?;
    match (mode, event.sale_mode) {
        (want, got) if want == got => Ok(event),
        (SaleMode::FairOpen, _) => Err(ApiError::NotAFairOpen),
        _ => Err(ApiError::NotABallot),
    }
}

/// The event, known and a sale that draws (a ballot, a fair open).
async fn drawing_event(rebuilder: &Rebuilder, id: &EventId) -> Result<Event, ApiError> {
    let event = rebuilder.event(id).await?.ok_or(ApiError::EventNotFound)?;
    if event.draw.is_none() {
        return Err(ApiError::NotABallot);
    }
    Ok(event)
}
