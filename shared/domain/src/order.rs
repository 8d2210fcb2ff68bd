//! Orders: the message a successful grab produces, and the states an order goes through.

use serde::{Deserialize, Serialize};

use super::ids::{Email, EventId, OrderId, TicketNo, UserId};

/// The order message of docs/DESIGN.md section 7. It is built by the grab script (which alone knows the
/// ticket number), stored verbatim as the outbox entry (keyed by its order id) and sent verbatim as
/// the SQS body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderMessage {
    pub v: u32,
    pub order_id: OrderId,
    pub event_id: EventId,
    pub user_id: UserId,
    pub email: Email,
    pub ticket_no: TicketNo,
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
    TicketOutOfRange(TicketNo),
}

impl OrderMessage {
    /// What its user holds once it is counted: this order and its number.
    pub fn holding(&self) -> Holding {
        Holding { order: self.order_id.clone(), ticket_no: self.ticket_no }
    }

    /// Reads and validates a message body: every id checked as at the HTTP edge.
    pub fn parse(body: &str) -> Result<Self, BadMessage> {
        let m: Self = serde_json::from_str(body).map_err(|e| BadMessage::Invalid(e.to_string()))?;
        if m.v != 1 {
            return Err(BadMessage::Version(m.v));
        }
        if m.ticket_no.get() == 0 || m.ticket_no.get() > super::event::MAX_CAPACITY {
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
    pub fn complete(&self, ticket_no: TicketNo) -> String {
        format!("{},\"ticket_no\":{ticket_no}}}", self.0)
    }

    /// The user a head as Redis keeps it names (a sharded grab's take under way keeps its head).
    pub fn user_of(head: &str) -> Result<UserId, String> {
        let whole = Self(head.to_owned()).complete(TicketNo::new(1));
        OrderMessage::parse(&whole).map(|m| m.user_id).map_err(|e| e.to_string())
    }
}

/// A waiting user's order message before a returned ticket comes: the JSON object of
/// [`OrderMessage`] without `order_id`, `created_at` and `ticket_no`, and without its closing
/// brace, marked `promoted`. It waits in Redis beside the user's place; when the user's turn comes
/// a script appends [`WaitHead::tail`] and then the ticket number, as the grab script completes a
/// [`MessageHead`].
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

    /// What a script appends to a waiting head before the ticket number: the promotion's order id
    /// and creation time, as `,"order_id":...,"created_at":...` (the script then appends
    /// `,"ticket_no":<n>}`, [`Self::complete`] in Rust).
    pub fn tail(order_id: &OrderId, created_at: &str) -> String {
        let tail = serde_json::json!({ "order_id": order_id, "created_at": created_at });
        let mut text = tail.to_string();
        text.replace_range(..1, ",");
        text.pop();
        text
    }

    /// The promoted order's whole message, exactly as the scripts write it into the outbox.
    pub fn complete(&self, tail: &str, ticket_no: TicketNo) -> String {
        format!("{}{tail},\"ticket_no\":{ticket_no}}}", self.0)
    }
}

/// The other message the orders queue carries: a user who waited is told the waitlist closed
/// with no ticket for them. Sealed like an order; the mail consumer sends it once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClosedNotice {
    pub v: u32,
    /// Always [`ClosedNotice::KIND`]: what tells the message from an order.
    pub notice: String,
    pub event_id: EventId,
    pub user_id: UserId,
    pub email: Email,
}

impl ClosedNotice {
    pub const KIND: &'static str = "WAITLIST_CLOSED";

    pub fn new(event_id: EventId, user_id: UserId, email: Email) -> Self {
        Self { v: 1, notice: Self::KIND.to_owned(), event_id, user_id, email }
    }

    pub fn body(&self) -> String {
        serde_json::to_string(self).expect("ids always serialize")
    }
}

/// A message on the orders queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueMessage {
    Order(OrderMessage),
    WaitlistClosed(ClosedNotice),
}

impl QueueMessage {
    /// An order (the common case, read first), or a notice; anything else is refused as an order.
    pub fn parse(body: &str) -> Result<Self, BadMessage> {
        match OrderMessage::parse(body) {
            Ok(order) => Ok(Self::Order(order)),
            Err(not_an_order) => match serde_json::from_str::<ClosedNotice>(body) {
                Ok(n) if n.v == 1 && n.notice == ClosedNotice::KIND => Ok(Self::WaitlistClosed(n)),
                _ => Err(not_an_order),
            },
        }
    }
}

/// A user's place on an event's waitlist, as DynamoDB keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiter {
    pub user: UserId,
    pub email: Email,
    /// Places count up from 1 in the order users joined; the lowest waiting place is served first.
    pub place: u64,
}

/// What a user holds: an order and its ticket number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holding {
    pub order: OrderId,
    pub ticket_no: TicketNo,
}

/// A user holding a ticket number through an order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Buyer {
    pub user: UserId,
    pub order: OrderId,
    pub ticket_no: TicketNo,
}

impl Buyer {
    pub fn holding(&self) -> Holding {
        Holding { order: self.order.clone(), ticket_no: self.ticket_no }
    }
}

/// A cancelled order, as a rebuild needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cancelled {
    pub user: UserId,
    pub order: OrderId,
    pub ticket_no: TicketNo,
    /// When it was cancelled (epoch ms): a number returned after the sale's end is held for the
    /// waitlist, not put back on sale.
    pub at_ms: i64,
    /// Its number is still to be given back (its give-back marker is there): the cache must hold it
    /// for the user until the give-back runs.
    pub give_back_pending: bool,
}

impl Cancelled {
    /// What its user holds until the give-back runs.
    pub fn holding(&self) -> Holding {
        Holding { order: self.order.clone(), ticket_no: self.ticket_no }
    }
}

/// Who holds what, as DynamoDB says: the input of an exact rebuild of a lost cache.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holdings {
    /// Every stored order's buyer (rejected ones too, so their users see their order rather than
    /// grab again), and the cancelled orders whose number is still to be given back.
    pub buyers: Vec<Buyer>,
    /// Ticket numbers held: by confirmed orders, by orders on their way (the outbox), and by
    /// cancelled orders still to be given back.
    pub held: std::collections::HashSet<TicketNo>,
    /// Cancelled orders given back: their users may not grab again.
    pub cancelled: Vec<Cancelled>,
    /// Free numbers held for the waitlist: returned after the sale's end with nobody waiting.
    pub returned: std::collections::BTreeSet<TicketNo>,
    /// The waitlist, by place: users still waiting (holding no order).
    pub waiting: Vec<Waiter>,
    /// Orders the rebuild itself made: a returned number and a waiting user found together (a
    /// failover lost the give-back's write but not the join's durable place). They go to the
    /// outbox, whence reconcile sends them. Order id and whole message.
    pub promotions: Vec<(OrderId, String)>,
    /// How many of `promotions` were numbers found free beside waiting users during the sale.
    pub promoted_free: u64,
    /// Orders found only in a sent record (their bucket lost its outbox while they were on their
    /// way): they go back to the outbox, so reconcile sends them again if the queue lost them.
    pub restored: Vec<(OrderId, String)>,
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
    pub ticket_no: TicketNo,
    pub status: OrderStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When the ticket was scanned at the door.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checked_in_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancelled_at: Option<String>,
    /// A red packet's amount (computed from the event's split, not stored with the order).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amount: Option<super::red_packet::Amount>,
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
                proptest::prop_assert!(m.ticket_no.get() >= 1 && m.ticket_no.get() <= crate::event::MAX_CAPACITY);
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
        let message = OrderMessage::parse(&head.complete(TicketNo::new(42))).expect("a valid order message");
        assert_eq!(
            message,
            OrderMessage {
                v: 1,
                order_id: order.clone(),
                event_id: event.clone(),
                user_id: user.clone(),
                email: email.clone(),
                ticket_no: TicketNo::new(42),
                created_at: "2026-11-23T10:00:00Z".into(),
                promoted: false,
            }
        );
        assert!(
            !head.complete(TicketNo::new(42)).contains("promoted"),
            "a grab's message says nothing of the waitlist"
        );
    }

    #[test]
    fn a_waiting_head_with_its_tail_is_a_promoted_order_message() {
        let order = OrderId::generate();
        let event = EventId::parse("lecture-1").unwrap();
        let user = UserId::parse("u2").unwrap();
        let email = Email::parse("grace@example.org").unwrap();
        let head = WaitHead::new(&event, &user, &email);
        let body = head.complete(&WaitHead::tail(&order, "2026-11-24T10:00:00Z"), TicketNo::new(7));
        let message = OrderMessage::parse(&body).expect("a valid order message");
        assert_eq!((message.user_id, message.ticket_no, message.promoted), (user, TicketNo::new(7), true));
        assert_eq!(message.order_id, order);
    }

    #[test]
    fn a_queue_message_is_an_order_or_a_closing_notice_and_nothing_else() {
        let notice = ClosedNotice::new(
            EventId::parse("lecture-1").unwrap(),
            UserId::parse("u3").unwrap(),
            Email::parse("u3@example.org").unwrap(),
        );
        assert_eq!(QueueMessage::parse(&notice.body()), Ok(QueueMessage::WaitlistClosed(notice.clone())));
        let mut other = serde_json::to_value(&notice).unwrap();
        other["notice"] = "SOMETHING_ELSE".into();
        assert!(QueueMessage::parse(&other.to_string()).is_err());
        other["notice"] = ClosedNotice::KIND.into();
        other["ticket_no"] = 3.into();
        assert!(QueueMessage::parse(&other.to_string()).is_err(), "no field beyond a notice's");
    }
}
