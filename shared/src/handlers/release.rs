//! release: an organiser publishes an event. The event is written to DynamoDB first (conditional
//! put: a taken id is `409 EVENT_EXISTS`), then Redis is warmed with every ticket number.
//!
//! An event that names an `expected_rate` is answered with its warm fleet (kept by reconcile) and
//! the warnings of the deployment's and the account's limits (docs/DESIGN.md section 12).
//!
//! Reached through `POST /admin/events` (admins only) and by direct invocation
//! (`sam remote invoke` with `events/release-direct.json`), which IAM already restricts to admins.

use lambda_http::{Body, Request, Response, http::StatusCode};
use serde_json::Value;
use time::OffsetDateTime;

use crate::{
    delivery::Courier,
    domain::{
        Event, EventDraft, InvalidEvent,
        draw::Algorithm,
        entry_receipt::{ReceiptKey, ReceiptKeyRing},
        event::FieldProblem,
        warm_fleet::{self, DeploymentLimits, WarmFleet, Warning},
    },
    fleet::{LimitsReader, deployment_limits_from_env},
    gate::{Gate, GateError},
    handlers::draws::draw::{Draw, DrawStep, Reveal},
    http::{
        ApiError, Caller, apigw, json,
        reply::{endpoint, event_id, json_body},
        routes::Endpoint,
        serve,
    },
    recovery::{Rebuild, Rebuilder, RecoveryError},
    secrets::StagedSecret,
    setup::Adapters,
    store::{PutEventError, Store, StoreError},
};

#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
    #[error(transparent)]
    Invalid(#[from] InvalidEvent),
    #[error("an event with this id exists")]
    Exists,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Gate(#[from] GateError),
    #[error(transparent)]
    Recovery(#[from] RecoveryError),
    #[error("the event's cache is being rebuilt; retry shortly")]
    Busy,
}

/// How a release's failure reaches the HTTP caller (the stable codes themselves are
/// `http::problem`'s).
impl From<ReleaseError> for ApiError {
    fn from(e: ReleaseError) -> Self {
        match e {
            ReleaseError::Invalid(e) => e.into(),
            ReleaseError::Exists => ApiError::EventExists,
            ReleaseError::Store(e) => e.into(),
            ReleaseError::Gate(e) => e.into(),
            ReleaseError::Recovery(e) => e.into(),
            ReleaseError::Busy => ApiError::Busy,
        }
    }
}

#[derive(Clone)]
pub struct Release {
    store: Store,
    gate: Gate,
    rebuilder: Rebuilder,
    /// What an open's expected rate is checked against.
    limits: LimitsReader,
    deployment: DeploymentLimits,
    /// The beacon chains a draw may name (quicknet; the deployment's own, configured).
    chains: Vec<crate::domain::beacon::Chain>,
    /// A ballot's draw (`POST /admin/events/{id}/draw`).
    draw: Draw,
    /// The entry receipts' keys: a draw's event commits to their public halves at release.
    receipts: StagedSecret<ReceiptKey>,
}

impl Release {
    /// `courier` sends a ballot's winning orders, as grab sends a grab's.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        store: Store,
        gate: Gate,
        rebuilder: Rebuilder,
        courier: Courier,
        limits: LimitsReader,
        deployment: DeploymentLimits,
        chains: Vec<crate::domain::beacon::Chain>,
        receipts: StagedSecret<ReceiptKey>,
    ) -> Self {
        let draw = Draw::new(store.clone(), gate.clone(), rebuilder.clone(), courier, receipts.clone());
        Self { store, gate, rebuilder, limits, deployment, chains, draw, receipts }
    }

    pub async fn from_env() -> Result<Self, super::StartError> {
        let adapters = Adapters::from_env().await;
        let store = adapters.store_from_env()?;
        let gate = adapters.gate_from_env().await?;
        let rebuilder = adapters.rebuilder_from_env(&store, &gate)?;
        let queue = adapters.orders_queue(&crate::config::QueueSettings::from_env()?);
        let courier = Courier::new(gate.clone(), queue, crate::config::seal_keys(adapters.sdk()).await?);
        let limits = LimitsReader::new(adapters.sdk());
        Ok(Self::new(
            store,
            gate,
            rebuilder,
            courier,
            limits,
            deployment_limits_from_env()?,
            crate::config::beacon_chains()?,
            crate::config::receipt_keys(adapters.sdk())?,
        ))
    }

    /// What the caller is answered: the event, and for an open with an expected rate its warm fleet
    /// and what to raise before it (the account's limits read now); for a sharded event whether
    /// its buckets sit on as many masters (the cluster's slot map read now).
    pub async fn reply(&self, event: &Event) -> Value {
        let (warm_fleet, mut warnings) = match WarmFleet::of(event, &self.deployment) {
            Some(fleet) => (Some(fleet), warm_fleet::warnings(event, &self.deployment, &self.limits.read().await)),
            None => (None, Vec::new()),
        };
        if event.buckets > 1 {
            match self.gate.bucket_masters(&self.gate.buckets_of(event)).await {
                Ok(Some(masters)) => warnings.extend(warm_fleet::shared_masters(&masters)),
                Ok(None) => {}
                Err(e) => tracing::warn!(event_id = %event.id, error = %e, "the cluster's slot map could not be read"),
            }
        }
        if !warnings.is_empty() {
            let codes: Vec<&str> = warnings.iter().map(|w| w.code).collect();
            tracing::warn!(event_id = %event.id, warnings = ?codes, "the open's expected rate exceeds a limit");
        }
        serde_json::to_value(ReleasedEvent { event, remaining: event.capacity, warm_fleet, warnings })
            .unwrap_or_default()
    }

    /// Publishes an event: DynamoDB first, then the cache.
    ///
    /// A retry of a release whose cache is missing (same id, same definition: the warming failed, or
    /// the cache was lost since) goes through the exact rebuild, never a fresh warm: tickets already
    /// held stay held and the outbox is kept, so an organiser's retry never sells a ticket twice
    /// or loses an order, and never leaves an event that cannot sell.
    pub async fn release(&self, draft: EventDraft, now: OffsetDateTime) -> Result<Event, ReleaseError> {
        let mut event = draft.into_event(now)?;
        // A named beacon round: a chain this deployment knows, its first round after the entries
        // close, not out yet (filled in when the release left it out).
        let close = event.entries_close();
        if let (Some(terms), Some(close)) = (event.draw.as_mut(), close) {
            match terms.check_round(&self.chains, close.unix_timestamp(), now.unix_timestamp()) {
                Ok(Some(round)) => {
                    if let Some(named) = &mut terms.beacon {
                        named.round = round;
                    }
                }
                Ok(None) => {}
                Err(problem) => {
                    return Err(InvalidEvent(vec![FieldProblem { field: "draw_beacon".into(), problem }]).into());
                }
            }
        }
        // A draw's receipts may be signed only by the keys held now (the current one, and a
        // staged rotation's): fixed before any entry, in the terms it publishes.
        if let Some(terms) = event.draw.as_mut()
            && terms.algorithm == Algorithm::V2
        {
            let keys = self.receipts.get().await.map_err(|e| {
                tracing::error!(dependency = "secretsmanager", error = %e, "the receipt keys cannot be read");
                ReleaseError::Busy
            })?;
            terms.receipt_keys = ReceiptKeyRing::of(&keys).committed();
        }
        match self.store.put_event(&event).await {
            Ok(()) => {}
            Err(PutEventError::Exists) => {
                let stored = self.store.get_event(&event.id).await?.ok_or(ReleaseError::Exists)?;
                let same = stored.event.same_release(&event);
                if !same || self.gate.window(&event.id).await?.is_some() {
                    return Err(ReleaseError::Exists);
                }
                return match self.rebuilder.rebuild(&stored.event).await? {
                    Rebuild::Done | Rebuild::Present => Ok(stored.event),
                    Rebuild::Busy => Err(ReleaseError::Busy),
                    Rebuild::Ended => Err(ReleaseError::Exists),
                };
            }
            Err(PutEventError::Store(e)) => return Err(e.into()),
        }
        self.gate.warm(&event).await?;
        tracing::info!(event_id = %event.id, capacity = event.capacity, "event released");
        Ok(event)
    }

    /// `POST /admin/events`, and a ballot's `POST /admin/events/{id}/draw`.
    pub async fn handle(&self, req: Request) -> Response<Body> {
        serve("release", req, |req| async move {
            Caller::require_admin(&req)?;
            if endpoint(&req) == Some(Endpoint::Draw) {
                let id = event_id(&req)?;
                let reveal: Reveal = json_body(&req)?;
                return Ok(match self.draw.draw(&id, &reveal, OffsetDateTime::now_utc()).await? {
                    DrawStep::Done(drawn) => (json(StatusCode::OK, &drawn), "DRAWN"),
                    // Not finished by this ask: asking again goes on from where it stopped.
                    DrawStep::Drawing(progress) => {
                        let mut reply = json(StatusCode::ACCEPTED, &progress);
                        reply.headers_mut().insert("retry-after", http::HeaderValue::from_static("1"));
                        (reply, "DRAWING")
                    }
                });
            }
            let body: Value = json_body(&req)?;
            let draft = EventDraft::from_json(&body)?;
            let event = self.release(draft, OffsetDateTime::now_utc()).await?;
            Ok((json(StatusCode::CREATED, &self.reply(&event).await), "CREATED"))
        })
        .await
    }

    /// Any invocation payload: an HTTP API event goes through [`Self::handle`]; anything else must
    /// be a direct release payload. The reply is an HTTP API response or the released event.
    pub async fn handle_invocation(&self, payload: Value) -> Result<Value, DirectError> {
        if apigw::is_http_api_event(&payload) {
            let event = serde_json::from_value(payload).map_err(|e| DirectError::NotAnEvent(e.to_string()))?;
            let response = self.handle(apigw::into_request(event)).await;
            return serde_json::to_value(apigw::into_event_response(response))
                .map_err(|e| DirectError::NotAnEvent(e.to_string()));
        }
        let draft = EventDraft::from_json(&payload).map_err(DirectError::Invalid)?;
        let event = self.release(draft, OffsetDateTime::now_utc()).await.map_err(|e| match e {
            ReleaseError::Invalid(e) => DirectError::Invalid(e),
            ReleaseError::Exists => DirectError::Exists,
            other => {
                tracing::error!(error = %other, "direct release failed");
                DirectError::Busy
            }
        })?;
        Ok(self.reply(&event).await)
    }
}

/// Why a direct invocation failed; the error type and message are what `sam remote invoke` shows.
#[derive(Debug, thiserror::Error)]
pub enum DirectError {
    #[error("INVALID_EVENT: {0}")]
    Invalid(InvalidEvent),
    #[error("INVALID_EVENT: the payload is neither an HTTP API event nor a release payload: {0}")]
    NotAnEvent(String),
    #[error("EVENT_EXISTS: an event with this id exists")]
    Exists,
    #[error("BUSY: a dependency failed; retry shortly")]
    Busy,
}

impl DirectError {
    /// The stable code (docs/DESIGN.md section 4), Lambda's `errorType` for the invoker.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Invalid(_) | Self::NotAnEvent(_) => "INVALID_EVENT",
            Self::Exists => "EVENT_EXISTS",
            Self::Busy => "BUSY",
        }
    }
}

impl From<DirectError> for lambda_runtime::Diagnostic {
    fn from(e: DirectError) -> Self {
        Self { error_type: e.code().into(), error_message: e.to_string() }
    }
}

/// A released event: every ticket number is free.
#[derive(serde::Serialize)]
struct ReleasedEvent<'a> {
    #[serde(flatten)]
    event: &'a Event,
    remaining: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    warm_fleet: Option<WarmFleet>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<Warning>,
}
