//! Orders: the message a successful grab produces, and the states an order goes through.

use serde::{Deserialize, Serialize};

use super::ids::{EventId, OrderId};

/// The order message of DESIGN.md section 7. It is built by the grab script (which alone knows the
/// ticket number), stored verbatim as the outbox entry and sent verbatim as the SQS body, so the
/// consumer can remove the outbox entry by the exact body it received.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderMessage {
    pub v: u32,
    pub order_id: String,
    pub event_id: String,
    pub user_id: String,
    pub email: String,
    pub ticket_no: u32,
    pub created_at: String,
}

impl OrderMessage {
    /// Reads and validates a message body: every id checked as at the HTTP edge.
    pub fn parse(body: &str) -> Result<Self, String> {
        let m: Self = serde_json::from_str(body).map_err(|e| format!("not an order message: {e}"))?;
        if m.v != 1 {
            return Err(format!("unknown message version {}", m.v));
        }
        super::EventId::parse(&m.event_id).map_err(|e| e.to_string())?;
        super::UserId::parse(&m.user_id).map_err(|e| e.to_string())?;
        super::OrderId::parse(&m.order_id).map_err(|e| e.to_string())?;
        super::Email::parse(&m.email).map_err(|e| e.to_string())?;
        if m.ticket_no == 0 || m.ticket_no > super::event::MAX_CAPACITY {
            return Err(format!("ticket number {} out of range", m.ticket_no));
        }
        Ok(m)
    }
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
}

impl OrderStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "PENDING",
            Self::Confirmed => "CONFIRMED",
            Self::Rejected => "REJECTED",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "PENDING" => Some(Self::Pending),
            "CONFIRMED" => Some(Self::Confirmed),
            "REJECTED" => Some(Self::Rejected),
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
}
