//! A provisioned environment's warm-up (docs/DESIGN.md section 12): the events its fleet is kept
//! for, made ready in its memory at its init, minutes before the open, rather than at its first
//! request, when every other environment reads the same items. One on demand has a request
//! waiting: it makes nothing ready ahead.

use std::future::Future;

use crate::{domain::EventId, gate::Gate};

/// How long a provisioned environment's init may spend making its fleet's events ready.
pub(super) const WARM_UP_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

/// Each event the warm fleet is kept for ([`Gate::warming`], which reconcile writes) made ready by
/// `ready` (which says whether it is, and logs why not), all at once and within [`WARM_UP_WITHIN`];
/// how many are. What is not ready by then is read at its first request, as before.
pub async fn warm_up<F, Fut>(gate: &Gate, ready: F) -> usize
where
    F: Fn(EventId) -> Fut,
    Fut: Future<Output = bool>,
{
    let read = async {
        let events = match gate.warming().await {
            Ok(events) => events,
            Err(e) => {
                tracing::warn!(error = %e, "the events the warm fleet is for could not be read; each is read at its first request");
                return 0;
            }
        };
        futures::future::join_all(events.into_iter().map(&ready)).await.into_iter().filter(|ready| *ready).count()
    };
    tokio::time::timeout(WARM_UP_WITHIN, read).await.unwrap_or_else(|_| {
        tracing::warn!("the warm events were not all read in time; the rest are read at their first request");
        0
    })
}
