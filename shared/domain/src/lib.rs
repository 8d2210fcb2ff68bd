//! The product's own words: events, tickets, orders, the verify hash, sale modes and their draws,
//! red packets, the warm fleet's size. Pure types and rules;
//! nothing here does I/O or knows about HTTP, Redis, DynamoDB or SQS.

pub mod audit;
pub mod beacon;
pub mod confirmation;
pub mod draw;
pub mod entry_receipt;
pub mod event;
pub mod fairness_vectors;
pub mod fairness_vectors_v2;
pub mod hex;
pub mod ids;
pub mod instant;
pub mod key_rotation;
pub mod order;
pub mod order_seal;
pub mod proof_of_work;
pub mod red_packet;
pub mod sale_mode;
pub mod stream;
pub mod strict_json;
pub mod ticket_pass;
pub mod verify_hash;
pub mod warm_fleet;
pub mod window_count;

pub use event::{Event, EventDraft, InvalidEvent};
pub use ids::{DoorName, Email, EventId, InvalidId, OrderId, ScanId, TicketNo, UserId};
pub use order::{
    Buyer, Cancelled, ClosedNotice, Holding, Holdings, MailStatus, OrderMessage, OrderStatus, QueueMessage, Waiter,
};
