//! Orders: the message a successful grab produces, and the states an order goes through.

use serde::{Deserialize, Serialize};

use super::ids::{Email, EventId, OrderId, UserId};

/// The order message of DESIGN.md section 7. It is built by the grab script (which alone knows the
/// ticket number), stored verbatim as the outbox entry (keyed by its order id) and sent verbatim as
/// the SQS body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderMessage {
    pub v: u32,
    pub order_id: OrderId,
    pub event_id: EventId,
    pub user_id: UserId,
    pub email: Email,
    pub ticket_no: u32,
    pub created_at: String,
    /// The order went to a user from the waitlist (a returned ticket), not to a grab.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub promoted: bool,
}

/// Why a body is not an order message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadMessage {
    /// Not JSON, a field missing or of the wrong type, or an id that fails its check.
    #[error("not an order message: {0}")]
    Invalid(String),
    #[error("unknown message version {0}")]
    Version(u32),
    #[error("ticket number {0} out of range")]
    TicketOutOfRange(u32),
}

impl OrderMessage {
    /// Reads and validates a message body: every id checked as at the HTTP edge.
    pub fn parse(body: &str) -> Result<Self, BadMessage> {
        let m: Self = serde_json::from_str(body).map_err(|e| BadMessage::Invalid(e.to_string()))?;
        if m.v != 1 {
            return Err(BadMessage::Version(m.v));
        }
        if m.ticket_no == 0 || m.ticket_no > super::event::MAX_CAPACITY {
            return Err(BadMessage::TicketOutOfRange(m.ticket_no));
        }
        Ok(m)
    }
}

/// An order message before the gate gives it a ticket number: the JSON object of
/// [`OrderMessage`] without `ticket_no` and without its closing brace. The grab script completes it
/// by appending `,"ticket_no":<n>}` ([`MessageHead::complete`] says the same in Rust); splicing a
/// string costs the script far less than decoding and re-encoding JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageHead(String);

impl MessageHead {
    pub fn new(order_id: &OrderId, event: &EventId, user: &UserId, email: &Email, created_at: &str) -> Self {
        #[derive(Serialize)]
        struct Head<'a> {
            v: u32,
            order_id: &'a OrderId,
            event_id: &'a EventId,
            user_id: &'a UserId,
            email: &'a Email,
            created_at: &'a str,
        }
        let head = Head { v: 1, order_id, event_id: event, user_id: user, email, created_at };
        let mut text = serde_json::to_string(&head).expect("strings and numbers always serialize");
        text.pop(); // the closing brace: the script appends the ticket number, then one
        Self(text)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The whole message, exactly as the script writes it into the outbox: also the SQS body.
    pub fn complete(&self, ticket_no: u32) -> String {
        format!("{},\"ticket_no\":{ticket_no}}}", self.0)
    }
}

/// A waiting user's order message before a returned ticket comes: the JSON object of
/// [`OrderMessage`] without `order_id`, `created_at` and `ticket_no`, and without its closing
/// brace, marked `promoted`. It waits in Redis beside the user's place; the return script completes
/// it with [`WaitHead::tail`] when the user's turn comes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitHead(String);

impl WaitHead {
    pub fn new(event: &EventId, user: &UserId, email: &Email) -> Self {
        #[derive(Serialize)]
        struct Head<'a> {
            v: u32,
            event_id: &'a EventId,
            user_id: &'a UserId,
            email: &'a Email,
            promoted: bool,
        }
        let head = Head { v: 1, event_id: event, user_id: user, email, promoted: true };
        let mut text = serde_json::to_string(&head).expect("strings always serialize");
        text.pop();
        Self(text)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// What the return script appends to a waiting head to make the promoted order's message.
    pub fn tail(order_id: &OrderId, created_at: &str, ticket_no: u32) -> String {
        let tail = serde_json::json!({ "order_id": order_id, "created_at": created_at, "ticket_no": ticket_no });
        let mut text = tail.to_string();
        text.replace_range(..1, ",");
        text
    }
}

/// A user holding a ticket number through an order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Buyer {
    pub user: UserId,
    pub order: OrderId,
    pub ticket_no: u32,
}

/// Who holds what, as DynamoDB says: the input of an exact rebuild of a lost cache.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holdings {
    /// Every stored order's buyer (rejected ones too, so their users see their order rather than
    /// grab again).
    pub buyers: Vec<Buyer>,
    /// Ticket numbers held by confirmed orders.
    pub held: std::collections::HashSet<u32>,
    /// Users who cancelled, with the order they cancelled: they may not grab again.
    pub cancelled: Vec<(UserId, OrderId)>,
}

/// Where the confirmation mail of an order stands: `PENDING -> SENDING -> SENT`, moved only by
/// conditional updates so one order gets one mail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MailStatus {
    Pending,
    Sending,
    Sent,
    /// No mail is due (a rejected order).
    None,
}

impl MailStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "PENDING",
            Self::Sending => "SENDING",
            Self::Sent => "SENT",
            Self::None => "NONE",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "PENDING" => Some(Self::Pending),
            "SENDING" => Some(Self::Sending),
            "SENT" => Some(Self::Sent),
            "NONE" => Some(Self::None),
            _ => None,
        }
    }
}

/// Where an order stands, as the order query reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OrderStatus {
    /// Granted by the gate; not yet durable in DynamoDB.
    Pending,
    /// Durable: the ticket is the user's.
    Confirmed,
    /// Durable, but the ticket number was already held (the cache drifted); never oversold.
    Rejected,
    /// Given back by its holder; the ticket number went to the waitlist or back on sale.
    Cancelled,
}

impl OrderStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "PENDING",
            Self::Confirmed => "CONFIRMED",
            Self::Rejected => "REJECTED",
            Self::Cancelled => "CANCELLED",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "PENDING" => Some(Self::Pending),
            "CONFIRMED" => Some(Self::Confirmed),
            "REJECTED" => Some(Self::Rejected),
            "CANCELLED" => Some(Self::Cancelled),
            _ => None,
        }
    }
}

/// What a user is told about their order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OrderView {
    pub order_id: OrderId,
    pub event_id: EventId,
    pub ticket_no: u32,
    pub status: OrderStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When the ticket was scanned at the door.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checked_in_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancelled_at: Option<String>,
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2_000))]
        /// Any body, and any message with each field replaced by garbage: a clear error or a message
        /// whose every id and number holds the rules.
        #[test]
        fn any_body_is_refused_or_a_valid_order(
            body in "\\PC{0,200}",
            field in 0usize..7,
            garbage in prop_oneof![
                "\\PC{0,40}".prop_map(serde_json::Value::from),
                any::<i64>().prop_map(serde_json::Value::from),
                Just(serde_json::Value::Null),
            ],
        ) {
            let _ = OrderMessage::parse(&body);
            let mut message = serde_json::json!({
                "v": 1, "order_id": "0199a0b0-0000-7000-8000-000000000001", "event_id": "e1", "user_id": "u1",
                "email": "a@b.co", "created_at": "2026-11-23T10:00:00Z", "ticket_no": 3,
            });
            let key = ["v", "order_id", "event_id", "user_id", "email", "created_at", "ticket_no"][field];
            message[key] = garbage;
            if let Ok(m) = OrderMessage::parse(&message.to_string()) {
                proptest::prop_assert_eq!(m.v, 1);
                proptest::prop_assert!(m.ticket_no >= 1 && m.ticket_no <= crate::domain::event::MAX_CAPACITY);
                proptest::prop_assert!(EventId::parse(m.event_id.as_str()).is_ok() && UserId::parse(m.user_id.as_str()).is_ok());
                proptest::prop_assert!(OrderId::parse(m.order_id.as_str()).is_ok() && Email::parse(m.email.as_str()).is_ok());
            }
        }
    }

    #[test]
    fn a_completed_head_is_the_order_message() {
        let order = OrderId::generate();
        let event = EventId::parse("lecture-1").unwrap();
        let user = UserId::parse("u1").unwrap();
        let email = Email::parse("ada@example.org").unwrap();
        let head = MessageHead::new(&order, &event, &user, &email, "2026-11-23T10:00:00Z");
        assert!(!head.as_str().ends_with('}'));
        let message = OrderMessage::parse(&head.complete(42)).expect("a valid order message");
        assert_eq!(
            message,
            OrderMessage {
                v: 1,
                order_id: order.clone(),
                event_id: event.clone(),
                user_id: user.clone(),
                email: email.clone(),
                ticket_no: 42,
                created_at: "2026-11-23T10:00:00Z".into(),
                promoted: false,
            }
        );
        assert!(!head.complete(42).contains("promoted"), "a grab's message says nothing of the waitlist");
    }

    #[test]
    fn a_waiting_head_with_its_tail_is_a_promoted_order_message() {
        let order = OrderId::generate();
        let event = EventId::parse("lecture-1").unwrap();
        let user = UserId::parse("u2").unwrap();
        let email = Email::parse("grace@example.org").unwrap();
        let head = WaitHead::new(&event, &user, &email);
        let body = format!("{}{}", head.as_str(), WaitHead::tail(&order, "2026-11-24T10:00:00Z", 7));
        let message = OrderMessage::parse(&body).expect("a valid order message");
        assert_eq!((message.user_id, message.ticket_no, message.promoted), (user, 7, true));
        assert_eq!(message.order_id, order);
    }
}
