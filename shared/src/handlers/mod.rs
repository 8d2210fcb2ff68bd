//! One file per function: parse -> domain + adapters -> outcome -> reply. Each function's
//! dependencies are a struct built once per execution environment and lent to every request.

pub mod after_sale;
pub mod door;
pub mod grab;
pub mod limit;
pub mod mail;
pub mod query;
pub mod reconcile;
pub mod release;
pub mod verify_hash;

use crate::{config::ConfigError, gate::GateError};

/// Why a function could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot set up the redis client: {0}")]
    Gate(#[from] GateError),
}
