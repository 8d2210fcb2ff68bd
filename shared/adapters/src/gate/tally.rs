//! Each grab environment counts its outcomes in memory and writes them to the event's tally
//! (`keys::grab_tally`) about once a second, off the request path: the first count after a write
//! arms a timer, and a second later everything counted meanwhile goes in one pipeline per minute.
//! A grab pays a lock and an add; Redis sees one write per environment per second, never one per
//! grab, on a slot that is not the sale's, one of the tally's shards (docs/DESIGN.md section 12).
//!
//! Counts are the page's rates, not the audit's: a write that fails is logged and dropped, and an
//! environment that Lambda freezes holds its last second until it wakes.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use super::{Gate, GrabCounts};
use domain::EventId;

/// How long counts wait in memory before they are written.
pub const TALLY_EVERY: Duration = Duration::from_secs(1);

#[derive(Clone)]
pub struct GrabTally {
    gate: Gate,
    /// The tally's shard this environment writes (`keys::grab_tally`), drawn at its start.
    shard: u16,
    pending: Arc<Mutex<Pending>>,
}

#[derive(Default)]
struct Pending {
    counts: HashMap<EventId, GrabCounts>,
    /// A write is scheduled.
    armed: bool,
    /// Events this environment counted an outcome of the gate for, and when last: a refusal
    /// before the gate (a forged hash) is counted only for these, so a made-up event id makes
    /// no key.
    seen: HashMap<EventId, std::time::Instant>,
}

impl GrabTally {
    pub fn new(gate: Gate) -> Self {
        let shard = (uuid::Uuid::now_v7().as_u128() % u128::from(super::keys::TALLY_SHARDS)) as u16;
        Self { gate, shard, pending: Arc::default() }
    }

    /// One grab of `event` answered with `code` in the unix second `at`, by the gate (the event
    /// exists).
    pub fn count(&self, event: &EventId, code: &str, at: i64) {
        self.add(event, code, at, true);
    }

    /// A request refused before the gate (a forged hash), counted only for an event this
    /// environment has seen the gate answer for within the tallies' lifetime.
    pub fn count_if_seen(&self, event: &EventId, code: &str, at: i64) {
        self.add(event, code, at, false);
    }

    fn add(&self, event: &EventId, code: &str, at: i64, known: bool) {
        let arm = {
            let mut pending = self.pending.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let now = std::time::Instant::now();
            if known {
                match pending.seen.get_mut(event) {
                    Some(last) => *last = now,
                    None => {
                        pending.seen.retain(|_, last| now.duration_since(*last) < super::keys::TALLY_KEPT);
                        pending.seen.insert(event.clone(), now);
                    }
                }
            } else if pending.seen.get(event).is_none_or(|last| now.duration_since(*last) >= super::keys::TALLY_KEPT) {
                return;
            }
            let second = pending.counts.entry(event.clone()).or_default().entry(at).or_default();
            match second.get_mut(code) {
                Some(n) => *n += 1,
                None => {
                    second.insert(code.to_owned(), 1);
                }
            }
            !std::mem::replace(&mut pending.armed, true)
        };
        if arm {
            let tally = self.clone();
            tokio::spawn(async move {
                tokio::time::sleep(TALLY_EVERY).await;
                tally.flush().await;
            });
        }
    }

    /// Writes everything counted so far (tests call it rather than wait for the timer).
    pub async fn flush(&self) {
        let taken = {
            let mut pending = self.pending.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            pending.armed = false;
            std::mem::take(&mut pending.counts)
        };
        for (event, counts) in taken {
            if let Err(e) = self.gate.add_grab_counts(&event, self.shard, &counts).await {
                tracing::warn!(event_id = %event, error = %e, "grab tally not written; the live page misses these counts");
            }
        }
    }
}
