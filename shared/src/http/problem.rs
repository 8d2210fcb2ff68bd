//! The one place where outcomes become HTTP statuses and stable codes (docs/DESIGN.md section 4).

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
    #[error("your order is not confirmed yet; retry in a few seconds")]
    OrderPending,
    #[error("this order holds no ticket to give back")]
    NotCancellable,
    #[error("orders could be cancelled until {until}")]
    CancelClosed { until: String },
    #[error("this ticket was checked in at {at}{}", door.as_ref().map(|d| format!(" by {d}")).unwrap_or_default())]
    AlreadyCheckedIn { at: String, door: Option<String> },
    #[error("you cancelled your order for this event; one ticket per user, a returned one included")]
    OrderCancelled,
    #[error("you hold an order for this event already")]
    HoldsOrder,
    #[error("tickets are still on sale: grab one instead")]
    NotSoldOut,
    #[error("the waitlist is full")]
    WaitlistFull,
    #[error("the waitlist is closed: no ticket can come back any more")]
    WaitlistClosed,
    #[error("you are not on this event's waitlist")]
    NotWaiting,
    #[error("the ticket pass is not one this event issued")]
    BadPass,
    #[error("this ticket was cancelled")]
    TicketCancelled,
    #[error("the door is open from {from}{}", until.as_ref().map(|u| format!(" until {u}")).unwrap_or_default())]
    CheckInClosed { from: String, until: Option<String> },
    /// A door's offline time that cannot be: before the order existed, or outside the window.
    #[error("{0}")]
    OfflineTimeRefused(String),
    #[error("no ticket of this event has that number or order id")]
    TicketNotFound,
    #[error("this event's tickets are drawn by ballot: enter it at POST /events/{{id}}/entry")]
    BallotOnly,
    #[error("this event is not a ballot")]
    NotABallot,
    /// A ballot's winner gives a ticket back while the draw is still laying its waiting places: the
    /// number would reach nobody. Asked again once the draw is done, it goes to the first who waits.
    #[error("the ballot's draw is still being laid down: give the ticket back once it is done")]
    DrawUnderWay,
    #[error("this event is not a fair open")]
    NotAFairOpen,
    #[error("the queue opens at {from}")]
    QueueNotOpen { from: String },
    #[error("you have not joined this event's queue")]
    NotQueued,
    #[error("this event asks each entry for ticket-pow/v1 work of {bits} bits (proof_of_work in the body)")]
    BadProofOfWork { bits: u32 },
    #[error(
        "a fair open admits users in its queue's order: join it (POST /events/{{id}}/queue) and ask verify-hash with the admission it gives you once admitted"
    )]
    NotAdmitted,
    #[error("the ballot's registration is closed")]
    RegistrationClosed,
    #[error("you have not entered this ballot")]
    NotEntered,
    #[error("the ballot is not drawn yet")]
    NotDrawn,
    #[error("the draw may run from {from}, the time published at release")]
    DrawTooEarly { from: String },
    #[error("{0}")]
    BadReveal(String),
    #[error("no such route")]
    RouteNotFound,
    #[error("the service is busy; retry shortly")]
    Busy,
}

impl ApiError {
    /// Each outcome's status, stable machine code and title, said once.
    fn parts(&self) -> (StatusCode, &'static str, &'static str) {
        use StatusCode as S;
        match self {
            Self::Unauthorized(_) => (S::UNAUTHORIZED, "UNAUTHORIZED", "Authentication required"),
            Self::Forbidden => (S::FORBIDDEN, "FORBIDDEN", "Forbidden"),
            Self::EmailNotVerified => (S::FORBIDDEN, "EMAIL_NOT_VERIFIED", "E-mail not verified"),
            Self::InvalidEvent(_) => (S::BAD_REQUEST, "INVALID_EVENT", "Invalid event"),
            Self::BadRequest(_) => (S::BAD_REQUEST, "BAD_REQUEST", "Bad request"),
            Self::PayloadTooLarge(_) => (S::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE", "Payload too large"),
            Self::EventExists => (S::CONFLICT, "EVENT_EXISTS", "Event exists"),
            Self::EventNotFound => (S::NOT_FOUND, "EVENT_NOT_FOUND", "Event not found"),
            Self::SaleNotStarted => (S::FORBIDDEN, "SALE_NOT_STARTED", "Sale not started"),
            Self::SaleEnded => (S::GONE, "SALE_ENDED", "Sale ended"),
            Self::BadHash => (S::FORBIDDEN, "BAD_HASH", "Bad hash"),
            Self::SoldOut => (S::CONFLICT, "SOLD_OUT", "Sold out"),
            Self::RateLimited { .. } => (S::TOO_MANY_REQUESTS, "RATE_LIMITED", "Rate limited"),
            Self::NoOrder => (S::NOT_FOUND, "NO_ORDER", "No order"),
            Self::OrderPending => (S::CONFLICT, "ORDER_PENDING", "Order pending"),
            Self::NotCancellable => (S::CONFLICT, "NOT_CANCELLABLE", "Not cancellable"),
            Self::CancelClosed { .. } => (S::GONE, "CANCEL_CLOSED", "Cancellation closed"),
            Self::AlreadyCheckedIn { .. } => (S::CONFLICT, "ALREADY_CHECKED_IN", "Already checked in"),
            Self::OrderCancelled => (S::CONFLICT, "ORDER_CANCELLED", "Order cancelled"),
            Self::HoldsOrder => (S::CONFLICT, "HOLDS_ORDER", "Holds an order"),
            Self::NotSoldOut => (S::CONFLICT, "NOT_SOLD_OUT", "Not sold out"),
            Self::WaitlistFull => (S::CONFLICT, "WAITLIST_FULL", "Waitlist full"),
            Self::WaitlistClosed => (S::GONE, "WAITLIST_CLOSED", "Waitlist closed"),
            Self::NotWaiting => (S::NOT_FOUND, "NOT_WAITING", "Not waiting"),
            Self::BadPass => (S::FORBIDDEN, "BAD_PASS", "Bad pass"),
            Self::TicketCancelled => (S::CONFLICT, "TICKET_CANCELLED", "Ticket cancelled"),
            Self::CheckInClosed { .. } => (S::CONFLICT, "CHECK_IN_CLOSED", "Check-in closed"),
            Self::OfflineTimeRefused(_) => (S::CONFLICT, "OFFLINE_TIME_REFUSED", "Offline time refused"),
            Self::TicketNotFound => (S::NOT_FOUND, "TICKET_NOT_FOUND", "Ticket not found"),
            Self::BallotOnly => (S::CONFLICT, "BALLOT_ONLY", "Ballot only"),
            Self::NotABallot => (S::CONFLICT, "NOT_A_BALLOT", "Not a ballot"),
            Self::DrawUnderWay => (S::CONFLICT, "DRAW_UNDER_WAY", "Draw under way"),
            Self::NotAFairOpen => (S::CONFLICT, "NOT_A_FAIR_OPEN", "Not a fair open"),
            Self::QueueNotOpen { .. } => (S::CONFLICT, "QUEUE_NOT_OPEN", "Queue not open"),
            Self::NotQueued => (S::NOT_FOUND, "NOT_QUEUED", "Not queued"),
            Self::BadProofOfWork { .. } => (S::FORBIDDEN, "BAD_PROOF_OF_WORK", "Bad proof of work"),
            Self::NotAdmitted => (S::FORBIDDEN, "NOT_ADMITTED", "Not admitted"),
            Self::RegistrationClosed => (S::GONE, "REGISTRATION_CLOSED", "Registration closed"),
            Self::NotEntered => (S::NOT_FOUND, "NOT_ENTERED", "Not entered"),
            Self::NotDrawn => (S::CONFLICT, "NOT_DRAWN", "Not drawn"),
            Self::DrawTooEarly { .. } => (S::CONFLICT, "DRAW_TOO_EARLY", "Draw too early"),
            Self::BadReveal(_) => (S::BAD_REQUEST, "BAD_REVEAL", "Bad reveal"),
            Self::RouteNotFound => (S::NOT_FOUND, "NOT_FOUND", "Not found"),
            Self::Busy => (S::SERVICE_UNAVAILABLE, "BUSY", "Busy"),
        }
    }

    pub fn status(&self) -> StatusCode {
        self.parts().0
    }

    /// The stable machine code clients switch on.
    pub fn code(&self) -> &'static str {
        self.parts().1
    }

    fn title(&self) -> &'static str {
        self.parts().2
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
        if let Self::AlreadyCheckedIn { at, door } = &self {
            body["checked_in_at"] = json!(at);
            if let Some(door) = door {
                body["door"] = json!(door);
            }
        }
        let mut builder = Response::builder()
            .status(status)
            .header("content-type", "application/problem+json")
            .header("cache-control", "no-store");
        match &self {
            Self::RateLimited { retry_after_ms } => {
                builder = builder.header("retry-after", retry_after_ms.div_ceil(1000).max(1).to_string());
            }
            Self::Busy | Self::DrawUnderWay => builder = builder.header("retry-after", "1"),
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

impl From<crate::store::ListError> for ApiError {
    fn from(e: crate::store::ListError) -> Self {
        match e {
            crate::store::ListError::BadCursor(e) => ApiError::BadRequest(e.to_string()),
            crate::store::ListError::Store(e) => e.into(),
        }
    }
}

impl From<crate::give_back::GiveBackError> for ApiError {
    fn from(e: crate::give_back::GiveBackError) -> Self {
        match e {
            crate::give_back::GiveBackError::Gate(e) => e.into(),
            crate::give_back::GiveBackError::Store(e) => e.into(),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        tracing::error!(dependency = "dynamodb", error = %e, "dependency failed");
        Self::Busy
    }
}

impl From<crate::secrets::SecretError> for ApiError {
    fn from(e: crate::secrets::SecretError) -> Self {
        tracing::error!(dependency = "secretsmanager", error = %e, "dependency failed");
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

impl From<crate::recovery::RecoveryError> for ApiError {
    fn from(e: crate::recovery::RecoveryError) -> Self {
        use crate::recovery::RecoveryError as R;
        match e {
            R::Gate(e) => e.into(),
            R::Store(e) => e.into(),
            R::Queue(e) => e.into(),
            R::QueueSlow(_) => {
                tracing::warn!(dependency = "sqs", error = %e, "dependency slow");
                ApiError::Busy
            }
        }
    }
}
