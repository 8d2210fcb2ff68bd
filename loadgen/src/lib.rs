//! # loadgen
//!
//! Runs the seeds' sales against the local runner or a deployed API, as their users would: the
//! organiser releases an event, every user fetches a verify hash, everyone grabs in the opening
//! second, and the run waits until every winner is `CONFIRMED` and mailed. Then it checks the
//! invariants of docs/DESIGN.md section 13 over HTTP and reports throughput and latency.
//!
//! - [`api`]: the routes, as a client calls them;
//! - [`run`]: the phases of one sale and the checks; [`ballot`]: a ballot's; [`ballot_scale`]: a
//!   ballot of a million entrants as a benchmark;
//! - [`report`]: what was measured, for people and as JSON; [`chart`]: the sale drawn as an SVG;
//! - [`verdict`]: what `ticketgrab-verify` finds in an event's published documents;
//!   [`document_vectors`]: docs/FAIRNESS.md's vectors of whole documents and of its strict rules;
//! - [`fanout`]: the rush fanned out over load workers (the load kit's Lambda function, `loadkit/`),
//!   merged back into one report.

pub mod api;
pub mod ballot;
pub mod ballot_scale;
pub mod chart;
pub mod document_vectors;
pub mod fanout;
pub mod report;
pub mod run;
pub mod verdict;
