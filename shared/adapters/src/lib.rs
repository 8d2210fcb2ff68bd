//! # ticket-grab's adapters: what the product stands on
//!
//! Each outside system behind its own type, built from typed settings; the layer between the
//! domain (below: the `domain` crate, which knows none of this) and the handlers (above: the
//! `shared` crate). Nothing here knows HTTP or a route.
//!
//! - [`gate`]: Redis: the keys and their layout ([`gate::keys`]), the scripts that decide (grab,
//!   admit, give-back, wait), the outbox, the sent records, the stock, the sold-out memory;
//! - [`store`]: DynamoDB, the source of truth; [`queue`]: the SQS orders queue; [`mailer`]: SES;
//! - [`secrets`]: the keys from Secrets Manager; [`fleet`]: the warm fleet (provisioned
//!   concurrency) and the account's limits;
//! - [`settings`]: every setting's variable, default, readers and meaning, once; [`config`]: the
//!   settings typed, read once at cold start (a malformed value stops it, naming
//!   the variable); [`aws`]: the SDK configuration and how its errors may be told; [`telemetry`]:
//!   JSON logs; [`metrics`]: CloudWatch metrics in Embedded Metric Format.

pub mod aws;
pub mod config;
pub mod fleet;
pub mod gate;
pub mod mailer;
pub mod metrics;
pub mod queue;
pub mod secrets;
pub mod settings;
pub mod store;
pub mod telemetry;

/// A random fraction in [0, 1] (a UUIDv7's random bits): the spreads that keep a warm fleet's
/// environments from doing the same thing in the same moment (a key's read again, the reader's
/// slot map, the sold-out memory's span).
pub(crate) fn random_fraction() -> f64 {
    (uuid::Uuid::now_v7().as_u128() & u128::from(u32::MAX)) as f64 / f64::from(u32::MAX)
}
