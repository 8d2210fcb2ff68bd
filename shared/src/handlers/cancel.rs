//! `DELETE /events/{id}/order` (grab): a holder cancels their own order, and its ticket number goes
//! back to the sale: to the first waiting user ([`super::waitlist`]), or to the free numbers.
//!
//! A cancellation is durable in DynamoDB first (one transaction frees the ticket number and leaves a
//! give-back marker), then Redis takes the number back in one script (on a sharded event, in steps
//! from the canceller's home to the line at bucket 0: `gate::handing`): to the head of the waitlist
//! as a normal order message (so mail, the outbox and reconcile need no new path), or to the free
//! numbers. A crash between any two is finished by reconcile from the marker.

use lambda_http::{Body, Request, Response, http::StatusCode};
use time::OffsetDateTime;

use crate::{
    domain::{Event, EventId, OrderStatus, event::rfc3339, order::OrderView, sale_mode::SaleMode},
    gate::GaveBack,
    give_back::GiveBacks,
    http::{ApiError, Caller, json},
    recovery::{Rebuild, Rebuilder},
    store::{
        Store,
        cancellations::{Cancellation, GiveBackDue},
    },
};

/// `DELETE /events/{id}/order` (grab).
#[derive(Clone)]
pub struct Cancel {
    store: Store,
    returns: GiveBacks,
    rebuilder: Rebuilder,
}

impl Cancel {
    pub fn new(store: Store, returns: GiveBacks, rebuilder: Rebuilder) -> Self {
        Self { store, returns, rebuilder }
    }

    async fn known(&self, event: &EventId) -> Result<Event, ApiError> {
        self.rebuilder.event(event).await?.ok_or(ApiError::EventNotFound)
    }

    /// Cancels the caller's own order (the key is built from the token's user: no other order can
    /// be named). Twice is the same `200`.
    pub async fn cancel(
        &self,
        req: &Request,
        id: &EventId,
        caller: &Caller,
    ) -> Result<(Response<Body>, &'static str), ApiError> {
        // Nothing is read from a body here, so one is a malformed request, not ignored.
        if !req.body().is_empty() {
            return Err(ApiError::BadRequest("DELETE /events/{id}/order takes no body".into()));
        }
        let event = self.known(id).await?;
        let Some(order) = self.store.get_order_now(id, &caller.user).await? else {
            // Granted but not yet durable: DynamoDB must hold it before it can be given back.
            return match self.rebuilder.holding(&event, &caller.user).await {
                Ok(Some(_)) => Err(ApiError::OrderPending),
                Ok(None) => Err(ApiError::NoOrder),
                Err(crate::recovery::HoldingUnknown) => Err(ApiError::Busy),
            };
        };
        match order.status {
            OrderStatus::Cancelled => return Ok((cancelled(&order), "ALREADY_CANCELLED")),
            OrderStatus::Rejected | OrderStatus::Pending => return Err(ApiError::NotCancellable),
            OrderStatus::Confirmed => {}
        }
        let now = OffsetDateTime::now_utc();
        if !event.cancellable(now) {
            return Err(ApiError::CancelClosed { until: rfc3339(event.cancel_until) });
        }
        if let Some(at) = order.checked_in_at {
            return Err(ApiError::AlreadyCheckedIn { at, door: None });
        }
        // A ballot's number given back while its draw still lays waiting places would find the
        // line empty and go where no sale can open: not before the draw is done (it only ever
        // becomes done, so a look before the cancellation holds after it).
        if event.sale_mode == SaleMode::Ballot && !self.store.ballot_state(id).await?.draw.is_some_and(|d| d.done) {
            return Err(ApiError::DrawUnderWay);
        }
        match self.store.cancel_order(id, &caller.user, &order, now).await? {
            Cancellation::Cancelled(view) => {
                let due = GiveBackDue {
                    user: caller.user.clone(),
                    order_id: view.order_id.clone(),
                    ticket_no: view.ticket_no,
                    cancelled_at: now,
                };
                self.give_back(&event, &due).await;
                Ok((cancelled(&view), "CANCELLED"))
            }
            Cancellation::AlreadyCancelled(view) => Ok((cancelled(&view), "ALREADY_CANCELLED")),
            Cancellation::CheckedIn { at } => Err(ApiError::AlreadyCheckedIn { at, door: None }),
            Cancellation::NotCancellable(_) => Err(ApiError::NotCancellable),
        }
    }

    /// The cancellation is durable: the number goes back now if it can, else reconcile does it
    /// from the marker. Nothing here changes the caller's reply.
    async fn give_back(&self, event: &Event, due: &GiveBackDue) {
        for attempt in 0..2 {
            match self.returns.give_back(&event.id, due).await {
                Ok(GaveBack::NotCached) if attempt == 0 => match self.rebuilder.rebuild(event).await {
                    Ok(Rebuild::Done | Rebuild::Present) => continue,
                    Ok(_) => {}
                    Err(e) => tracing::warn!(event_id = %event.id, error = %e, "rebuild before a give-back failed"),
                },
                Ok(GaveBack::LineLost) if attempt == 0 => {
                    match self.rebuilder.repair(event, "the waitlist's line and its heads disagree").await {
                        Ok(Rebuild::Done | Rebuild::Present) => continue,
                        Ok(_) => {}
                        Err(e) => tracing::warn!(event_id = %event.id, error = %e, "repair before a give-back failed"),
                    }
                }
                Ok(_) => return,
                Err(e) => tracing::warn!(event_id = %event.id, error = %e, "give-back failed"),
            }
            break;
        }
        tracing::warn!(event_id = %event.id, order_id = %due.order_id, "ticket number left for reconcile to give back");
    }
}

fn cancelled(order: &OrderView) -> Response<Body> {
    json(StatusCode::OK, order)
}
