//! The per-user limit of every route a user calls (the route table says which counter and how
//! many requests per window): one `INCR` in Redis before the handler reads anything. When Redis
//! cannot count, or does not answer within [`REDIS_PATIENCE`], the environment counts the user's
//! requests itself, with the same limit ([`WindowCounts`]): a route is never unlimited, only
//! counted per environment while Redis is in trouble. The limit protects the other dependencies;
//! it never decides an outcome (the grab script, DynamoDB's conditions do). The door holds no Redis
//! (it holds nothing but the public pass keys): its environments always count for themselves, so
//! a staff token's rate there is bounded by the limit times the door's environments.

use std::{sync::Arc, time::Duration};

use lambda_http::Request;

use crate::{
    config::UserLimits,
    domain::{UserId, window_count::WindowCounts},
    gate::Gate,
    http::{
        ApiError, Caller,
        routes::{self, Limit},
    },
};

/// How long a request waits for Redis's count before the environment's own count decides: a
/// count takes a millisecond; a Redis slow enough to miss this is one the rush is overloading.
pub const REDIS_PATIENCE: Duration = Duration::from_millis(200);

#[derive(Clone)]
pub struct Limiter {
    /// Where the counts are kept; `None`: in the environment only.
    gate: Option<Gate>,
    limits: UserLimits,
    /// This environment's own counts, for when Redis cannot give one.
    local: Arc<WindowCounts<(UserId, &'static str)>>,
}

impl Limiter {
    pub fn new(gate: Gate, limits: UserLimits) -> Self {
        Self { gate: Some(gate), limits, local: Arc::default() }
    }

    /// Counted by each environment alone (a function without Redis).
    pub fn in_environment(limits: UserLimits) -> Self {
        Self { gate: None, limits, local: Arc::default() }
    }

    /// `429 RATE_LIMITED` with the wait when `caller` is over the request's route budget.
    pub async fn admit(&self, req: &Request, caller: &Caller) -> Result<(), ApiError> {
        let Some(Limit::PerUser { name, .. }) = routes::of_request(req).map(|r| r.limit) else { return Ok(()) };
        let Some(limit) = self.limits.of(name) else { return Ok(()) };
        let here = || {
            self.local
                .count((caller.user.clone(), name), limit.requests, limit.window, std::time::Instant::now())
                .map(|wait| wait.as_millis().max(1) as u64)
        };
        let retry_after_ms = match &self.gate {
            None => here(),
            Some(gate) => {
                match tokio::time::timeout(REDIS_PATIENCE, gate.count_request(&caller.user, name, limit)).await {
                    Ok(Ok(over)) => over,
                    failed => {
                        let why = match failed {
                            Ok(Err(e)) => e.to_string(),
                            _ => format!("no answer within {REDIS_PATIENCE:?}"),
                        };
                        tracing::warn!(route = name, error = %why, "redis could not count; this environment's own limit applies");
                        here()
                    }
                }
            }
        };
        match retry_after_ms {
            Some(retry_after_ms) => Err(ApiError::RateLimited { retry_after_ms }),
            None => Ok(()),
        }
    }
}
