//! # The local runner
//!
//! Runs the whole system on a developer's machine with no AWS account and no Docker:
//!
//! - [`stack`]: starts redis-server and MiniStack (through `scripts/stack`) when they are not up;
//! - [`provision`]: the table, the queues and the sender identity, as the template defines them;
//! - [`authorizer`]: plays the HTTP API's JWT authorizer with HS256 development tokens;
//! - [`server`]: plays API Gateway: routes, payload 2.0 events, the very handlers Lambda runs;
//! - [`esm`]: plays the SQS event source mapping for the mail function; [`mailbox`]: sent mail;
//! - [`functions`]: those handlers, built once; [`demo`]: the demo event and the curl guide;
//! - [`client`]: HTTP clients for the tools and tests, on the SDK's TLS stack.

pub mod authorizer;
pub mod client;
pub mod demo;
pub mod esm;
pub mod functions;
pub mod mailbox;
pub mod network;
pub mod provision;
pub mod server;
pub mod settings;
pub mod stack;

pub use functions::Functions;
pub use settings::LocalSettings;
