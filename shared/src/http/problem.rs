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

/// The stable codes clients switch on, each with its one status and title: the source of
/// openapi.yaml's `Problem.code` enum (`cargo xtask gen`) and of every test that lists the codes.
macro_rules! codes {
    ($($code:ident => $status:ident, $text:literal, $title:literal;)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Code { $($code),* }

        impl Code {
            /// Every code, in the order they are declared.
            pub const ALL: &[Code] = &[$(Code::$code),*];

            pub fn status(self) -> StatusCode {
                match self { $(Code::$code => StatusCode::$status),* }
            }

            pub fn as_str(self) -> &'static str {
                match self { $(Code::$code => $text),* }
            }

            pub fn title(self) -> &'static str {
                match self { $(Code::$code => $title),* }
            }
        }
    };
}

codes! {
    Unauthorized => UNAUTHORIZED, "UNAUTHORIZED", "Authentication required";
    Forbidden => FORBIDDEN, "FORBIDDEN", "Forbidden";
    EmailNotVerified => FORBIDDEN, "EMAIL_NOT_VERIFIED", "E-mail not verified";
    InvalidEvent => BAD_REQUEST, "INVALID_EVENT", "Invalid event";
    BadRequest => BAD_REQUEST, "BAD_REQUEST", "Bad request";
    PayloadTooLarge => PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE", "Payload too large";
    EventExists => CONFLICT, "EVENT_EXISTS", "Event exists";
    EventNotFound => NOT_FOUND, "EVENT_NOT_FOUND", "Event not found";
    SaleNotStarted => FORBIDDEN, "SALE_NOT_STARTED", "Sale not started";
    SaleEnded => GONE, "SALE_ENDED", "Sale ended";
    BadHash => FORBIDDEN, "BAD_HASH", "Bad hash";
    SoldOut => CONFLICT, "SOLD_OUT", "Sold out";
    RateLimited => TOO_MANY_REQUESTS, "RATE_LIMITED", "Rate limited";
    NoOrder => NOT_FOUND, "NO_ORDER", "No order";
    OrderPending => CONFLICT, "ORDER_PENDING", "Order pending";
    NotCancellable => CONFLICT, "NOT_CANCELLABLE", "Not cancellable";
    CancelClosed => GONE, "CANCEL_CLOSED", "Cancellation closed";
    AlreadyCheckedIn => CONFLICT, "ALREADY_CHECKED_IN", "Already checked in";
    OrderCancelled => CONFLICT, "ORDER_CANCELLED", "Order cancelled";
    HoldsOrder => CONFLICT, "HOLDS_ORDER", "Holds an order";
    NotSoldOut => CONFLICT, "NOT_SOLD_OUT", "Not sold out";
    WaitlistFull => CONFLICT, "WAITLIST_FULL", "Waitlist full";
    WaitlistClosed => GONE, "WAITLIST_CLOSED", "Waitlist closed";
    NotWaiting => NOT_FOUND, "NOT_WAITING", "Not waiting";
    BadPass => FORBIDDEN, "BAD_PASS", "Bad pass";
    TicketCancelled => CONFLICT, "TICKET_CANCELLED", "Ticket cancelled";
    CheckInClosed => CONFLICT, "CHECK_IN_CLOSED", "Check-in closed";
    OfflineTimeRefused => CONFLICT, "OFFLINE_TIME_REFUSED", "Offline time refused";
    TicketNotFound => NOT_FOUND, "TICKET_NOT_FOUND", "Ticket not found";
    BallotOnly => CONFLICT, "BALLOT_ONLY", "Ballot only";
    NotABallot => CONFLICT, "NOT_A_BALLOT", "Not a ballot";
    DrawUnderWay => CONFLICT, "DRAW_UNDER_WAY", "Draw under way";
    NotAFairOpen => CONFLICT, "NOT_A_FAIR_OPEN", "Not a fair open";
    QueueNotOpen => CONFLICT, "QUEUE_NOT_OPEN", "Queue not open";
    NotQueued => NOT_FOUND, "NOT_QUEUED", "Not queued";
    BadProofOfWork => FORBIDDEN, "BAD_PROOF_OF_WORK", "Bad proof of work";
    NotAdmitted => FORBIDDEN, "NOT_ADMITTED", "Not admitted";
    RegistrationClosed => GONE, "REGISTRATION_CLOSED", "Registration closed";
    NotEntered => NOT_FOUND, "NOT_ENTERED", "Not entered";
    NotDrawn => CONFLICT, "NOT_DRAWN", "Not drawn";
    DrawTooEarly => CONFLICT, "DRAW_TOO_EARLY", "Draw too early";
    BadReveal => BAD_REQUEST, "BAD_REVEAL", "Bad reveal";
    NotFound => NOT_FOUND, "NOT_FOUND", "Not found";
    Busy => SERVICE_UNAVAILABLE, "BUSY", "Busy";
}

impl ApiError {
    /// Each outcome's code (and through it its status and title), said once.
    pub fn kind(&self) -> Code {
        match self {
            Self::Unauthorized(_) => Code::Unauthorized,
            Self::Forbidden => Code::Forbidden,
            Self::EmailNotVerified => Code::EmailNotVerified,
            Self::InvalidEvent(_) => Code::InvalidEvent,
            Self::BadRequest(_) => Code::BadRequest,
            Self::PayloadTooLarge(_) => Code::PayloadTooLarge,
            Self::EventExists => Code::EventExists,
            Self::EventNotFound => Code::EventNotFound,
            Self::SaleNotStarted => Code::SaleNotStarted,
            Self::SaleEnded => Code::SaleEnded,
            Self::BadHash => Code::BadHash,
            Self::SoldOut => Code::SoldOut,
            Self::RateLimited { .. } => Code::RateLimited,
            Self::NoOrder => Code::NoOrder,
            Self::OrderPending => Code::OrderPending,
            Self::NotCancellable => Code::NotCancellable,
            Self::CancelClosed { .. } => Code::CancelClosed,
            Self::AlreadyCheckedIn { .. } => Code::AlreadyCheckedIn,
            Self::OrderCancelled => Code::OrderCancelled,
            Self::HoldsOrder => Code::HoldsOrder,
            Self::NotSoldOut => Code::NotSoldOut,
            Self::WaitlistFull => Code::WaitlistFull,
            Self::WaitlistClosed => Code::WaitlistClosed,
            Self::NotWaiting => Code::NotWaiting,
            Self::BadPass => Code::BadPass,
            Self::TicketCancelled => Code::TicketCancelled,
            Self::CheckInClosed { .. } => Code::CheckInClosed,
            Self::OfflineTimeRefused(_) => Code::OfflineTimeRefused,
            Self::TicketNotFound => Code::TicketNotFound,
            Self::BallotOnly => Code::BallotOnly,
            Self::NotABallot => Code::NotABallot,
            Self::DrawUnderWay => Code::DrawUnderWay,
            Self::NotAFairOpen => Code::NotAFairOpen,
            Self::QueueNotOpen { .. } => Code::QueueNotOpen,
            Self::NotQueued => Code::NotQueued,
            Self::BadProofOfWork { .. } => Code::BadProofOfWork,
            Self::NotAdmitted => Code::NotAdmitted,
            Self::RegistrationClosed => Code::RegistrationClosed,
            Self::NotEntered => Code::NotEntered,
            Self::NotDrawn => Code::NotDrawn,
            Self::DrawTooEarly { .. } => Code::DrawTooEarly,
            Self::BadReveal(_) => Code::BadReveal,
            Self::RouteNotFound => Code::NotFound,
            Self::Busy => Code::Busy,
        }
    }

    pub fn status(&self) -> StatusCode {
        self.kind().status()
    }

    /// The stable machine code clients switch on.
    pub fn code(&self) -> &'static str {
        self.kind().as_str()
    }

    fn title(&self) -> &'static str {
        self.kind().title()
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
