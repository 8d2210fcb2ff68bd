//! # ticket-grab: the shared crate
//!
//! Every Lambda function of the product is a dozen-line `main.rs` that builds its dependencies once
//! and hands each request to a handler here. The contract, and a table of where each kind of change
//! goes, is `docs/DESIGN.md` (sections 6-11 and 16). A request reads top to bottom:
//!
//! - [`http`]: the API Gateway edge: the caller's claims, the route table ([`http::routes`], whose
//!   `Endpoint` handlers match on), JSON in, `problem+json` out (the one mapping of outcomes to
//!   statuses and codes lives in [`http::problem`]);
//! - [`handlers`]: one file per function: parse, call the domain and adapters, map the outcome
//!   (the grab function's cancel and waitlist routes: `handlers::cancel_and_wait`);
//! - [`domain`]: events, tickets, orders, ids (newtypes to the bottom), the verify hash, seals,
//!   passes and the audit; pure, no I/O;
//! - [`gate`]: Redis: the keys and their layout ([`gate::keys`]), the scripts that decide (grab,
//!   admit, give-back, wait), the outbox, the stock, warming and the exact rebuild;
//! - [`store`]: DynamoDB, the source of truth; [`queue`]: the SQS orders queue; [`mailer`]: SES;
//! - [`delivery`]: an order from the outbox to the queue, durable on the queue or on a replica;
//! - [`recovery`]: rebuilding a lost cache from DynamoDB; [`give_back`]: giving a cancelled ticket
//!   number back (to the waitlist's head, or on sale again);
//! - [`fleet`]: the warm fleet at an open (provisioned concurrency on grab's and verify-hash's
//!   alias) and the account's limits the release warns of;
//! - [`amounts`]: red-packet amounts by ticket number, each event's split computed once;
//! - [`adapters`]: the one way every function (and the local runner) builds the adapters above
//!   from their settings;
//! - [`config`]: every setting, typed, read once at cold start (a malformed value stops it, naming
//!   the variable); [`secrets`]: the HMAC keys from Secrets Manager; [`aws`]: the SDK configuration
//!   and how its errors may be told; [`telemetry`]: JSON logs; [`metrics`]: CloudWatch metrics in
//!   Embedded Metric Format.
//!
//! Layers point one way: handlers use the adapters, the adapters use the domain and `config`;
//! the domain uses nothing of the others.

pub mod adapters;
pub mod amounts;
pub mod aws;
pub mod config;
pub mod delivery;
pub mod domain;
pub mod fleet;
pub mod gate;
pub mod give_back;
pub mod handlers;
pub mod http;
pub mod mailer;
pub mod metrics;
pub mod queue;
pub mod recovery;
pub mod secrets;
pub mod store;
pub mod telemetry;

/// A random fraction in [0, 1] (a UUIDv7's random bits): the spreads that keep a warm fleet's
/// environments from doing the same thing in the same moment (a key's read again, the reader's
/// slot map, the sold-out memory's span).
pub(crate) fn random_fraction() -> f64 {
    (uuid::Uuid::now_v7().as_u128() & u128::from(u32::MAX)) as f64 / f64::from(u32::MAX)
}
