//! verify-hash: hands a user the per-event token that grab requires, only once the sale is open
//! (or within the configured margin before it).

use lambda_http::{Body, Request, Response, http::StatusCode};
use serde_json::json;
use time::OffsetDateTime;

use crate::{
    adapters::Adapters,
    config::{HashSettings, UserLimits},
    domain::{
        EventId,
        event::{epoch_ms, from_epoch_ms, rfc3339},
        sale_mode::SaleMode,
    },
    gate::{Gate, Window},
    http::{
        ApiError, Caller, json,
        reply::{event_id, query_param},
        serve,
    },
    recovery::Rebuilder,
};

#[derive(Clone)]
pub struct VerifyHash {
    gate: Gate,
    hash: HashSettings,
    rebuilder: Rebuilder,
    limiter: super::limit::Limiter,
}

impl VerifyHash {
    pub fn new(gate: Gate, hash: HashSettings, rebuilder: Rebuilder, limits: UserLimits) -> Self {
        let limiter = super::limit::Limiter::new(gate.clone(), limits);
        Self { gate, hash, rebuilder, limiter }
    }

    pub async fn from_env() -> Result<Self, super::StartError> {
        let adapters = Adapters::from_env().await;
        let store = adapters.store_from_env()?;
        let gate = adapters.gate_from_env().await?;
        let hash = HashSettings::load(adapters.sdk()).await?;
        let rebuilder = adapters.rebuilder_from_env(&store, &gate)?;
        Ok(Self::new(gate, hash, rebuilder, UserLimits::from_env(crate::http::routes::per_user_limits())?))
    }

    pub async fn handle(&self, req: Request) -> Response<Body> {
        serve("verify-hash", req, |req| async move {
            let caller = Caller::from_request(&req)?;
            let event = event_id(&req)?;
            self.limiter.admit(&req, &caller).await?;
            // The cache answers during a sale; DynamoDB only for an event the cache does not hold.
            let window = match self.gate.window(&event).await? {
                Some(w) => w,
                None => {
                    let stored = self.rebuilder.event(&event).await?.ok_or(ApiError::EventNotFound)?;
                    // A lost cache: start its rebuild now so the grab that follows finds it.
                    if let Err(e) = self.rebuilder.rebuild(&stored).await {
                        tracing::warn!(event_id = %event, error = %e, "rebuild from verify-hash failed");
                    }
                    Window {
                        start_ms: epoch_ms(stored.sale_start),
                        end_ms: epoch_ms(stored.sale_end),
                        cancel_until_ms: epoch_ms(stored.cancel_until),
                        closed: false,
                    }
                }
            };
            let now = epoch_ms(OffsetDateTime::now_utc());
            self.admitted(&req, &event, &caller, now).await?;
            let margin = self.hash.open_margin.as_millis() as i64;
            if now < window.start_ms - margin {
                return Err(ApiError::SaleNotStarted);
            }
            // After the sale's end a hash still serves the waitlist, until `cancel_until`: a ticket
            // returned then goes to a user who joins (the grab script refuses a grab by its clock).
            if now >= window.active_until_ms() || window.closed {
                return Err(ApiError::SaleEnded);
            }
            let expires_ms = (now + self.hash.ttl.as_millis() as i64).min(window.active_until_ms());
            let hash = self.hash.keys.get().await?.current.issue(&event, &caller.user, expires_ms);
            let expires_at = from_epoch_ms(expires_ms).map(rfc3339).unwrap_or_default();
            Ok((json(StatusCode::OK, &json!({ "hash": hash, "expires_at": expires_at })), "OK"))
        })
        .await
    }

    /// A fair open's hash goes only to a user its queue admitted: their admission token
    /// (`?admission=`, from `GET /events/{id}/queue`). The event is remembered per environment.
    async fn admitted(&self, req: &Request, event: &EventId, caller: &Caller, now: i64) -> Result<(), ApiError> {
        let Some(known) = self.rebuilder.event(event).await? else { return Ok(()) };
        if known.sale_mode != SaleMode::FairOpen {
            return Ok(());
        }
        let token = query_param(req, "admission").ok_or(ApiError::NotAdmitted)?;
        let keys = self.hash.keys.get().await?;
        keys.check(|k| k.verify_admission(token, event, &caller.user, now)).map_err(|_| ApiError::NotAdmitted)
    }
}
