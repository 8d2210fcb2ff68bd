//! # ticket-grab: the handlers
//!
//! Every Lambda function of the product is a dozen-line `main.rs` that builds its dependencies once
//! and hands each request to a handler here. The contract, and a table of where each kind of change
//! goes, is `docs/DESIGN.md` (sections 6-11 and 16). Three crates, each layer a crate, so an arrow
//! pointing up does not compile:
//!
//! - `domain` (`shared/domain`): events, tickets, orders, ids (newtypes to the bottom), the verify
//!   hash, seals, passes, draws and the audit; pure, no I/O;
//! - `adapters` (`shared/adapters`): Redis (the gate), DynamoDB (the store), SQS (the queue), SES
//!   (the mailer), Secrets Manager, Lambda's warm fleet, the settings, logs and metrics;
//! - this crate: the handlers and their HTTP edge, and the steps that use several adapters at once.
//!
//! A request reads top to bottom:
//!
//! - [`http`]: the API Gateway edge: the caller's claims, the route table ([`http::routes`], whose
//!   `Endpoint` handlers match on), JSON in, `problem+json` out (the one mapping of outcomes to
//!   statuses and codes lives in [`http::problem`]);
//! - [`handlers`]: a room per route (or per function, where a function serves one thing): parse,
//!   call the domain and adapters, map the outcome;
//! - [`delivery`]: an order from the outbox to the queue, durable on the queue or on a replica;
//! - [`recovery`]: rebuilding a lost cache from DynamoDB; [`give_back`]: giving a cancelled ticket
//!   number back (to the waitlist's head, or on sale again);
//! - [`amounts`]: red-packet amounts by ticket number, each event's split computed once;
//! - [`rights`]: each function's rights, the source of the template's policies;
//! - [`setup`]: the one way every function (and the local runner) builds its adapters from their
//!   settings.
//!
//! The lower crates are re-exported under their old names (`shared::domain`, `shared::gate`, ...),
//! so a binary depends on this crate alone.

pub use adapters::{aws, config, fleet, gate, mailer, metrics, queue, secrets, settings, store, telemetry};
pub use domain;

pub mod amounts;
pub mod delivery;
pub mod give_back;
pub mod handlers;
pub mod http;
pub mod recovery;
pub mod rights;
pub mod setup;
