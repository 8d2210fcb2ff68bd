//! The one place where outcomes become HTTP statuses and stable codes (DESIGN.md section 4).

use lambda_http::{Body, Response, http::StatusCode};
use serde_json::json;

use crate::{
    domain::event::{FieldProblem, InvalidEvent},
    gate::GateError,
    queue::QueueError,
    store::StoreError,
};

/// Every way a request can end other than success. Each variant has one status and one code.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    Unauthorized(&'static str),
    #[error("this route is for admins")]
    Forbidden,
    #[error("verify your e-mail address first: the confirmation and the ticket go to it")]
    EmailNotVerified,
    #[error("{0}")]
    InvalidEvent(InvalidEvent),
    #[error("{0}")]
    BadRequest(String),
    #[error("the body is larger than {0} bytes")]
    PayloadTooLarge(usize),
    #[error("an event with this id exists")]
    EventExists,
    #[error("no such event")]
    EventNotFound,
    #[error("the sale has not started")]
    SaleNotStarted,
    #[error("the sale has ended")]
    SaleEnded,
    #[error("the hash is missing, forged, foreign or expired; get a new one from verify-hash")]
    BadHash,
    #[error("every ticket is taken")]
    SoldOut,
    #[error("too many requests; retry after the given time")]
    RateLimited { retry_after_ms: u64 },
    #[error("you hold no order for this event")]
    NoOrder,
    #[error("no such route")]
    RouteNotFound,
    #[error("the service is busy; retry shortly")]
    Busy,
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden | Self::EmailNotVerified | Self::SaleNotStarted | Self::BadHash => StatusCode::FORBIDDEN,
            Self::InvalidEvent(_) | Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::EventExists | Self::SoldOut => StatusCode::CONFLICT,
            Self::EventNotFound | Self::NoOrder | Self::RouteNotFound => StatusCode::NOT_FOUND,
            Self::SaleEnded => StatusCode::GONE,
            Self::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Busy => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The stable machine code clients switch on.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unauthorized(_) => "UNAUTHORIZED",
            Self::Forbidden => "FORBIDDEN",
            Self::EmailNotVerified => "EMAIL_NOT_VERIFIED",
            Self::InvalidEvent(_) => "INVALID_EVENT",
            Self::BadRequest(_) => "BAD_REQUEST",
            Self::PayloadTooLarge(_) => "PAYLOAD_TOO_LARGE",
            Self::EventExists => "EVENT_EXISTS",
            Self::EventNotFound => "EVENT_NOT_FOUND",
            Self::SaleNotStarted => "SALE_NOT_STARTED",
            Self::SaleEnded => "SALE_ENDED",
            Self::BadHash => "BAD_HASH",
            Self::SoldOut => "SOLD_OUT",
            Self::RateLimited { .. } => "RATE_LIMITED",
            Self::NoOrder => "NO_ORDER",
            Self::RouteNotFound => "NOT_FOUND",
            Self::Busy => "BUSY",
        }
    }

    fn title(&self) -> &'static str {
        match self {
            Self::Unauthorized(_) => "Authentication required",
            Self::Forbidden => "Forbidden",
            Self::EmailNotVerified => "E-mail not verified",
            Self::InvalidEvent(_) => "Invalid event",
            Self::BadRequest(_) => "Bad request",
            Self::PayloadTooLarge(_) => "Payload too large",
            Self::EventExists => "Event exists",
            Self::EventNotFound => "Event not found",
            Self::SaleNotStarted => "Sale not started",
            Self::SaleEnded => "Sale ended",
            Self::BadHash => "Bad hash",
            Self::SoldOut => "Sold out",
            Self::RateLimited { .. } => "Rate limited",
            Self::NoOrder => "No order",
            Self::RouteNotFound => "Not found",
            Self::Busy => "Busy",
        }
    }

    /// The `application/problem+json` reply. 5xx bodies say nothing about the cause: that was
    /// logged where the failure was met.
    pub fn into_response(self) -> Response<Body> {
        let status = self.status();
        let mut body = json!({
            "type": format!("urn:ticket-grab:problem:{}", self.code().to_ascii_lowercase()),
            "title": self.title(),
            "status": status.as_u16(),
            "detail": self.to_string(),
            "code": self.code(),
        });
        if let Self::InvalidEvent(InvalidEvent(problems)) = &self {
            body["errors"] = serde_json::to_value::<&Vec<FieldProblem>>(problems).unwrap_or_default();
        }
        let mut builder = Response::builder()
            .status(status)
            .header("content-type", "application/problem+json")
            .header("cache-control", "no-store");
        match &self {
            Self::RateLimited { retry_after_ms } => {
                builder = builder.header("retry-after", retry_after_ms.div_ceil(1000).max(1).to_string());
            }
            Self::Busy => builder = builder.header("retry-after", "1"),
            _ => {}
        }
        builder.body(Body::Text(body.to_string())).unwrap_or_default()
    }
}

// A failing dependency is a 503 BUSY; its detail goes to the log, never to the client.
impl From<GateError> for ApiError {
    fn from(e: GateError) -> Self {
        tracing::error!(dependency = "redis", error = %e, "dependency failed");
        Self::Busy
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        tracing::error!(dependency = "dynamodb", error = %e, "dependency failed");
        Self::Busy
    }
}

impl From<QueueError> for ApiError {
    fn from(e: QueueError) -> Self {
        tracing::error!(dependency = "sqs", error = %e, "dependency failed");
        Self::Busy
    }
}

impl From<InvalidEvent> for ApiError {
    fn from(e: InvalidEvent) -> Self {
        Self::InvalidEvent(e)
    }
}
