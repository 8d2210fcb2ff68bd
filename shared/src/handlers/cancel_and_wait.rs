//! The grab function's other writes (it holds every dependency these need): a holder cancels
//! (`DELETE /events/{id}/order`), a sold-out user joins the waitlist
//! (`POST /events/{id}/waitlist`) and sees their place (`GET /events/{id}/waitlist`), and a user
//! enters a ballot (`POST /events/{id}/entry`) or a fair open's queue (`POST` and
//! `GET /events/{id}/queue`), both in `handlers::draws`.
//!
//! A cancellation is durable in DynamoDB first (one transaction frees the ticket number and leaves a
//! give-back marker), then Redis takes the number back in one script (on a sharded event, in steps
//! from the canceller's home to the line at bucket 0: `gate::handing`): to the head of the waitlist
//! as a normal order message (so mail, the outbox and reconcile need no new path), or to the free
//! numbers. A crash between any two is finished by reconcile from the marker.

use lambda_http::{Body, Request, Response, http::StatusCode};
use serde::Deserialize;
use serde_json::json;
use time::OffsetDateTime;

use crate::{
    config::{HashSettings, UserLimits},
    delivery::{Courier, Delivery},
    domain::{
        Event, EventId, OrderId, OrderStatus, Waiter,
        event::{epoch_ms, rfc3339},
        order::{OrderView, WaitHead},
        sale_mode::SaleMode,
    },
    gate::{Gate, GaveBack, InLine, Join, WaitlistPlace, Waitlisted},
    give_back::GiveBacks,
    http::{
        ApiError, Caller, json,
        reply::{endpoint, event_id, json_body},
        routes::Endpoint,
    },
    recovery::{Rebuild, Rebuilder},
    store::{
        Store,
        cancellations::{Cancellation, GiveBackDue},
    },
};

#[derive(Clone)]
pub struct CancelAndWait {
    store: Store,
    gate: Gate,
    courier: Courier,
    returns: GiveBacks,
    rebuilder: Rebuilder,
    hash: HashSettings,
    limiter: super::limit::Limiter,
    entries: super::draws::Entries,
    queue: super::draws::Queue,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JoinBody {
    hash: String,
}

impl CancelAndWait {
    pub fn new(
        store: Store,
        gate: Gate,
        courier: Courier,
        returns: GiveBacks,
        rebuilder: Rebuilder,
        hash: HashSettings,
        limits: UserLimits,
    ) -> Self {
        let limiter = super::limit::Limiter::new(gate.clone(), limits);
        let entries = super::draws::Entries::new(store.clone(), rebuilder.clone(), hash.receipts.clone());
        let queue =
            super::draws::Queue::new(store.clone(), rebuilder.clone(), hash.keys.clone(), hash.receipts.clone());
        Self { store, gate, courier, returns, rebuilder, hash, limiter, entries, queue }
    }

    /// One request of the three routes: the reply and its outcome code.
    pub async fn route(&self, req: Request) -> Result<(Response<Body>, &'static str), ApiError> {
        let caller = Caller::from_request(&req)?;
        let event = event_id(&req)?;
        self.limiter.admit(&req, &caller).await?;
        match endpoint(&req) {
            Some(Endpoint::Cancel) => {
                // Nothing is read from a body here, so one is a malformed request, not ignored.
                if !req.body().is_empty() {
                    return Err(ApiError::BadRequest("DELETE /events/{id}/order takes no body".into()));
                }
                self.cancel(&event, &caller).await
            }
            Some(Endpoint::Join) => {
                let body: JoinBody = json_body(&req)?;
                self.join(&event, &caller, &body.hash).await
            }
            Some(Endpoint::WaitlistPlace) => self.place(&event, &caller).await,
            Some(Endpoint::Enter) => {
                let work = super::draws::Work::of(&req)?;
                let (entry, new) = self.entries.register(&event, &caller, &work).await?;
                let (status, code) =
                    if new { (StatusCode::CREATED, "ENTERED") } else { (StatusCode::OK, "ALREADY_ENTERED") };
                Ok((json(status, &entry), code))
            }
            Some(Endpoint::JoinQueue) => {
                let work = super::draws::Work::of(&req)?;
                let (place, new) = self.queue.join(&event, &caller, &work).await?;
                let (status, code) =
                    if new { (StatusCode::CREATED, "QUEUED") } else { (StatusCode::OK, "ALREADY_QUEUED") };
                Ok((json(status, &place), code))
            }
            Some(Endpoint::QueuePlace) => Ok((json(StatusCode::OK, &self.queue.place(&event, &caller).await?), "OK")),
            Some(Endpoint::ReceiptKey) => {
                let known = self.known(&event).await?;
                let keys = self.hash.receipts.get().await?;
                let ring = crate::domain::entry_receipt::ReceiptKeyRing::of(&keys);
                let head = super::draws::draw_head(&self.store, &known).await?.map(|h| {
                    keys.current.sign_head(&crate::domain::entry_receipt::DrawHead { receipt_keys: ring.ids(), ..h })
                });
                Ok((json(StatusCode::OK, &ring.published(&event, head)), "OK"))
            }
            _ => Err(ApiError::RouteNotFound),
        }
    }

    async fn known(&self, event: &EventId) -> Result<Event, ApiError> {
        self.rebuilder.event(event).await?.ok_or(ApiError::EventNotFound)
    }

    /// Cancels the caller's own order (the key is built from the token's user: no other order can
    /// be named). Twice is the same `200`.
    async fn cancel(&self, id: &EventId, caller: &Caller) -> Result<(Response<Body>, &'static str), ApiError> {
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

    async fn join(
        &self,
        id: &EventId,
        caller: &Caller,
        hash: &str,
    ) -> Result<(Response<Body>, &'static str), ApiError> {
        let at = OffsetDateTime::now_utc();
        let now = epoch_ms(at);
        self.hash.keys.check(|k| k.verify(hash, id, &caller.user, now)).await?.map_err(|_| ApiError::BadHash)?;
        // A ballot's waitlist is its draw's order: nobody joins it otherwise.
        if self.known(id).await?.sale_mode == SaleMode::Ballot {
            return Err(ApiError::BallotOnly);
        }
        let email = caller.verified_email()?;
        let head = WaitHead::new(id, &caller.user, email);
        let promotion = OrderId::generate();
        let created_at = rfc3339(at);
        let join =
            Join { event: id, user: &caller.user, head: &head, clock_ms: now, promotion: &promotion, now: &created_at };
        let (mut joined, mut written) = self.gate.join_waitlist(&join).await?;
        if joined == Waitlisted::NotCached {
            let event = self.known(id).await?;
            match self.rebuilder.rebuild(&event).await? {
                Rebuild::Done | Rebuild::Present => (joined, written) = self.gate.join_waitlist(&join).await?,
                Rebuild::Busy => return Err(ApiError::Busy),
                Rebuild::Ended => return Err(ApiError::WaitlistClosed),
            }
        }
        match joined {
            Waitlisted::Joined { position, place } | Waitlisted::Waiting { position, place } => {
                // Durable before the user is told: a lost cache gives the place back from here. A
                // retry after a failed write finds the place in Redis and writes it again.
                let waiter = Waiter { user: caller.user.clone(), email: email.clone(), place };
                self.store.add_waiter(id, &waiter, at).await?;
                self.place_kept(id, &caller.user).await?;
                let (status, code) = match joined {
                    Waitlisted::Joined { .. } => (StatusCode::CREATED, "JOINED"),
                    _ => (StatusCode::OK, "WAITING"),
                };
                Ok((json(status, &json!({ "status": "WAITING", "position": position })), code))
            }
            Waitlisted::Promoted { ticket_no } => {
                // A number returned after the sale with nobody waiting: the user's order now, sent
                // like a grab's, with the same promise for a `202`.
                let message = head.complete(&WaitHead::tail(&promotion, &created_at), ticket_no);
                let delivery =
                    Delivery { event: id.clone(), order_id: promotion.clone(), message, written, generation: None };
                if !self.courier.deliver(&delivery).await {
                    return Err(ApiError::Busy);
                }
                let reply = json!({ "status": "PROMOTED", "order_id": promotion, "ticket_no": ticket_no });
                Ok((json(StatusCode::ACCEPTED, &reply), "PROMOTED"))
            }
            Waitlisted::Holds(_) => Err(ApiError::HoldsOrder),
            Waitlisted::Cancelled => Err(ApiError::OrderCancelled),
            Waitlisted::NotStarted => Err(ApiError::SaleNotStarted),
            Waitlisted::Closed => Err(ApiError::WaitlistClosed),
            Waitlisted::NotSoldOut => Err(ApiError::NotSoldOut),
            Waitlisted::Full => Err(ApiError::WaitlistFull),
            Waitlisted::NotCached => Err(ApiError::Busy),
        }
    }

    /// A join's place is in the line and durable before the user is told: a rebuild that read the
    /// waitlist from DynamoDB between the line's write and the durable one laid the line down
    /// without it. Asked once the place is durable: in the line as laid now (or promoted since),
    /// it stays; out of it, the line is repaired from DynamoDB, which has it now; while a rebuild
    /// is under way, busy (the retry finds the place, or joins again).
    #[doc(hidden)]
    pub async fn place_kept(&self, id: &EventId, user: &crate::domain::UserId) -> Result<(), ApiError> {
        for _ in 0..2 {
            match self.gate.in_line(id, user).await? {
                InLine::In => return Ok(()),
                InLine::NotCached => return Err(ApiError::Busy),
                InLine::Out => {}
            }
            if matches!(self.gate.waitlist_place(id, user).await?, WaitlistPlace::Holds(_)) {
                return Ok(());
            }
            let event = self.known(id).await?;
            match self.rebuilder.repair(&event, "a join's durable place is not in the line").await? {
                Rebuild::Done | Rebuild::Present => {}
                Rebuild::Busy => return Err(ApiError::Busy),
                Rebuild::Ended => return Err(ApiError::WaitlistClosed),
            }
        }
        Err(ApiError::Busy)
    }

    async fn place(&self, id: &EventId, caller: &Caller) -> Result<(Response<Body>, &'static str), ApiError> {
        // Remembered per environment once read: no DynamoDB read per request.
        let event = self.known(id).await?;
        if OffsetDateTime::now_utc() >= event.cancel_until {
            return Err(ApiError::WaitlistClosed);
        }
        let mut place = self.gate.waitlist_place(id, &caller.user).await?;
        if place == WaitlistPlace::NotWaiting {
            // A lost cache hides a place DynamoDB keeps: rebuilt, the place shows again. A line
            // that lost it while the rest of the cache is there (its key gone, or laid down by a
            // rebuild that read before the place was durable) is repaired from DynamoDB: a place
            // whose user holds no order there is one the line must show.
            let durable = self.gate.window(id).await?.is_some()
                && self.store.is_waiting(id, &caller.user).await?
                && self.store.get_order(id, &caller.user).await?.is_none();
            let rebuilt = if self.gate.window(id).await?.is_none() {
                Some(self.rebuilder.rebuild(&event).await?)
            } else if durable {
                // A promotion on its way to the user's home is no lost place: asked again, it shows.
                if self.gate.promotion_under_way(id, &caller.user).await? {
                    return Err(ApiError::Busy);
                }
                Some(self.rebuilder.repair(&event, "a durable place is not in the line").await?)
            } else {
                None
            };
            match rebuilt {
                Some(Rebuild::Done | Rebuild::Present) => place = self.gate.waitlist_place(id, &caller.user).await?,
                Some(Rebuild::Busy) => return Err(ApiError::Busy),
                Some(Rebuild::Ended) => return Err(ApiError::WaitlistClosed),
                None => {}
            }
            // Still missing (its repair not due yet): busy, never "not waiting" to one who waits.
            if durable && place == WaitlistPlace::NotWaiting {
                return Err(ApiError::Busy);
            }
        }
        match place {
            WaitlistPlace::Waiting { position, waiting } => Ok((
                json(StatusCode::OK, &json!({ "status": "WAITING", "position": position, "waiting": waiting })),
                "WAITING",
            )),
            WaitlistPlace::Holds(held) => Ok((
                json(
                    StatusCode::OK,
                    &json!({ "status": "HOLDS_ORDER", "order_id": held.order, "ticket_no": held.ticket_no }),
                ),
                "HOLDS_ORDER",
            )),
            WaitlistPlace::NotWaiting => Err(ApiError::NotWaiting),
        }
    }
}

fn cancelled(order: &OrderView) -> Response<Body> {
    json(StatusCode::OK, order)
}
