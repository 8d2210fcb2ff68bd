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
