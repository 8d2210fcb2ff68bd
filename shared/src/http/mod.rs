//! The API Gateway edge: who is calling (the authorizer's claims), the route table, JSON bodies,
//! `problem+json` errors, and the conversions between API Gateway events and `http` types that the
//! local runner and the release function's direct invocation share.

pub mod apigw;
pub mod caller;
pub mod lambda;
pub mod problem;
pub mod reply;
pub mod routes;

pub use caller::Caller;
pub use problem::ApiError;
pub use reply::{json, serve};
pub use routes::{ROUTES, Route};

/// Bodies larger than this are refused with 413 before they are parsed.
pub const MAX_BODY_BYTES: usize = 16 * 1024;
