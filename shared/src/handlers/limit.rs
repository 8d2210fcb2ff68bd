//! The per-user limit of every route a user calls (the route table says which counter and how
//! many requests per window): one `INCR` in Redis before the handler reads anything. When Redis
//! cannot count, the request goes on: the limit protects the other dependencies, it never decides
//! an outcome (the grab script, DynamoDB's conditions do).

use lambda_http::Request;

use crate::{
    config::UserLimits,
    gate::Gate,
    http::{
        ApiError, Caller,
        routes::{self, Limit},
    },
};

#[derive(Clone)]
pub struct Limiter {
    gate: Gate,
    limits: UserLimits,
}

impl Limiter {
    pub fn new(gate: Gate, limits: UserLimits) -> Self {
        Self { gate, limits }
    }

    /// `429 RATE_LIMITED` with the wait when `caller` is over the request's route budget.
    pub async fn admit(&self, req: &Request, caller: &Caller) -> Result<(), ApiError> {
        let Some(Limit::PerUser { name, .. }) = routes::of_request(req).map(|r| r.limit) else { return Ok(()) };
        let Some(limit) = self.limits.of(name) else { return Ok(()) };
        match self.gate.count_request(&caller.user, name, limit).await {
            Ok(Some(retry_after_ms)) => Err(ApiError::RateLimited { retry_after_ms }),
            Ok(None) => Ok(()),
            Err(e) => {
                tracing::warn!(route = name, error = %e, "redis unavailable; served without its rate limit");
                Ok(())
            }
        }
    }
}
