//! `POST /events/{id}/waitlist` and `GET /events/{id}/waitlist` (grab): a sold-out user joins the
//! waitlist and sees their place. A number a cancellation gives back ([`super::cancel`]) goes to
//! the head of the line as an order, so a place told to its user is durable in DynamoDB first and
//! found in the line: a lost cache is rebuilt with it, a line laid down without it is repaired.

use lambda_http::{Body, Request, Response, http::StatusCode};
use serde::Deserialize;
use serde_json::json;
use time::OffsetDateTime;

use crate::{
    delivery::{Courier, Delivery},
    domain::{
        Event, EventId, OrderId, Waiter,
        event::{epoch_ms, rfc3339},
        order::WaitHead,
        sale_mode::SaleMode,
        verify_hash::HashKey,
    },
    gate::{Gate, InLine, Join, WaitlistPlace, Waitlisted},
    http::{ApiError, Caller, json, reply::json_body},
    recovery::{Rebuild, Rebuilder},
    secrets::StagedSecret,
    store::Store,
};

/// `POST` and `GET /events/{id}/waitlist` (grab).
#[derive(Clone)]
pub struct Waitlist {
    store: Store,
    gate: Gate,
    courier: Courier,
    rebuilder: Rebuilder,
    /// The verify hash a join shows, as a grab's.
    keys: StagedSecret<HashKey>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JoinBody {
    hash: String,
}

impl Waitlist {
    pub fn new(store: Store, gate: Gate, courier: Courier, rebuilder: Rebuilder, keys: StagedSecret<HashKey>) -> Self {
        Self { store, gate, courier, rebuilder, keys }
    }

    async fn known(&self, event: &EventId) -> Result<Event, ApiError> {
        self.rebuilder.event(event).await?.ok_or(ApiError::EventNotFound)
    }

    /// `POST /events/{id}/waitlist {hash}`: `201 JOINED` with a new place, `200 WAITING` with the
    /// same place after; `202 PROMOTED` when a number is free and nobody waits.
    pub async fn join(
        &self,
        req: &Request,
        id: &EventId,
        caller: &Caller,
    ) -> Result<(Response<Body>, &'static str), ApiError> {
        let body: JoinBody = json_body(req)?;
        let at = OffsetDateTime::now_utc();
        let now = epoch_ms(at);
        self.keys.check(|k| k.verify(&body.hash, id, &caller.user, now)).await?.map_err(|_| ApiError::BadHash)?;
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
    /// `GET /events/{id}/waitlist`: the caller's place, or the order a promotion gave them.
    pub async fn place(&self, id: &EventId, caller: &Caller) -> Result<(Response<Body>, &'static str), ApiError> {
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
