//! verify-hash: hands a user the per-event token that grab requires, only once the sale is open
//! (or within the configured margin before it).
//!
//! It needs the event's window and the caller, not the cache: the event is read from DynamoDB once
//! per environment ([`EventBook`]: a released event never changes), so the one Redis call is the
//! per-user limit on the user's own slot and none lands on the event's buckets. Whether a ticket is
//! left, and whether the cache is there, is the grab's to find out (it rebuilds a lost cache).

use lambda_http::{Body, Request, Response, http::StatusCode};
use serde_json::json;
use time::OffsetDateTime;

use crate::{
    config::{HashSettings, UserLimits},
    domain::{
        UserId,
        event::{Event, epoch_ms, from_epoch_ms, rfc3339},
        sale_mode::SaleMode,
    },
    gate::{Gate, GrabTally},
    http::{
        ApiError, Caller, json,
        reply::{event_id, query_param},
        serve,
    },
    setup::Adapters,
    store::EventBook,
};

#[derive(Clone)]
pub struct VerifyHash {
    events: EventBook,
    /// Reads the events a warm fleet is kept for, at a provisioned environment's init.
    gate: Gate,
    hash: HashSettings,
    limiter: super::limit::Limiter,
    /// The organiser's count of the users turned away here: not admitted by a fair open's
    /// queue, or over their limit (an event this environment knows only: no key for made-up ids).
    tally: GrabTally,
}

impl VerifyHash {
    /// `gate` counts the per-user limit; nothing else here reads Redis.
    pub fn new(events: EventBook, gate: Gate, hash: HashSettings, limits: UserLimits) -> Self {
        Self {
            events,
            hash,
            tally: GrabTally::new(gate.clone()),
            limiter: super::limit::Limiter::new(gate.clone(), limits),
            gate,
        }
    }

    pub async fn from_env() -> Result<Self, super::StartError> {
        let adapters = Adapters::from_env().await;
        let store = adapters.store_from_env()?;
        let gate = adapters.gate_from_env().await?;
        let hash = HashSettings::load(adapters.sdk()).await?;
        let limits = UserLimits::from_env(crate::http::routes::per_user_limits())?;
        let this = Self::new(EventBook::new(store), gate, hash, limits);
        // An environment of the warm fleet (started ahead of the requests) reads the events its
        // fleet is for now, minutes before the open, rather than at its first request, when every
        // other one reads the same item. One on demand has a request waiting: it reads nothing more.
        if crate::setup::Init::from_env() == crate::setup::Init::Provisioned {
            this.warm_up().await;
        }
        Ok(this)
    }

    /// The events a warm fleet is kept for, read into this environment's memory before the open
    /// ([`super::warm_up`]); how many it now holds.
    pub async fn warm_up(&self) -> usize {
        super::warm_up::warm_up(&self.gate, |event| async move {
            match self.events.get(&event).await {
                Ok(found) => found.is_some(),
                Err(e) => {
                    tracing::warn!(event_id = %event, error = %e, "a warm event could not be read; it is read at its first request");
                    false
                }
            }
        })
        .await
    }

    pub async fn handle(&self, req: Request) -> Response<Body> {
        serve("verify-hash", req, |req| async move {
            let answered = self.issue(&req).await;
            if let (Err(refused @ (ApiError::NotAdmitted | ApiError::RateLimited { .. })), Ok(event)) =
                (&answered, event_id(&req))
                && self.events.knows(&event)
            {
                self.tally.count(&event, refused.code(), OffsetDateTime::now_utc().unix_timestamp());
            }
            answered
        })
        .await
    }

    /// The refusals counted for the live page (tests write them at once with `flush`).
    pub fn tally(&self) -> &GrabTally {
        &self.tally
    }

    async fn issue(&self, req: &Request) -> Result<(Response<Body>, &'static str), ApiError> {
        let caller = Caller::from_request(req)?;
        let event_id = event_id(req)?;
        self.limiter.admit(req, &caller).await?;
        let event = self.events.get(&event_id).await?.ok_or(ApiError::EventNotFound)?;
        let now = OffsetDateTime::now_utc();
        self.admitted(req, &event, &caller.user, epoch_ms(now)).await?;
        if now < event.sale_start - self.hash.open_margin {
            return Err(ApiError::SaleNotStarted);
        }
        // After the sale's end a hash still serves the waitlist, until `cancel_until`: a ticket
        // returned then goes to a user who joins (the grab script refuses a grab by its clock).
        let active_until = epoch_ms(event.active_until());
        let now = epoch_ms(now);
        if now >= active_until {
            return Err(ApiError::SaleEnded);
        }
        let expires_ms = (now + self.hash.ttl.as_millis() as i64).min(active_until);
        let hash = self.hash.keys.get().await?.current.issue(&event.id, &caller.user, expires_ms);
        let expires_at = from_epoch_ms(expires_ms).map(rfc3339).unwrap_or_default();
        Ok((json(StatusCode::OK, &json!({ "hash": hash, "expires_at": expires_at })), "OK"))
    }

    /// A fair open's hash goes only to a user its queue admitted: their admission token
    /// (`?admission=`, from `GET /events/{id}/queue`).
    async fn admitted(&self, req: &Request, event: &Event, user: &UserId, now: i64) -> Result<(), ApiError> {
        if event.sale_mode != SaleMode::FairOpen {
            return Ok(());
        }
        let token = query_param(req, "admission").ok_or(ApiError::NotAdmitted)?;
        self.hash
            .keys
            .check(|k| k.verify_admission(token, &event.id, user, now))
            .await?
            .map_err(|_| ApiError::NotAdmitted)
    }
}
