//! What the benchmarks share: an open event, and grab events as API Gateway delivers them.

pub mod measure;
pub mod sales;
