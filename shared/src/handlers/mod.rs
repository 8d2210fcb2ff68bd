//! One file per function: parse -> domain + adapters -> outcome -> reply. Each function's
//! dependencies are a struct built once per execution environment and lent to every request.

pub mod cancel_and_wait;
pub mod door;
pub mod draws;
pub mod grab;
pub mod limit;
pub mod live;
pub mod mail;
pub mod query;
pub mod reconcile;
pub mod release;
pub mod verify_hash;
pub mod warm_up;

pub use crate::adapters::StartError;
