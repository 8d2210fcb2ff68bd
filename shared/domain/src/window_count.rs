//! Requests counted in fixed windows, per key, in one process's memory: the per-user limit an
//! execution environment keeps itself when Redis cannot count or answers late
//! (`handlers::limit`), and the refused grabs it answers from the sold-out memory, which write
//! nothing in Redis (`handlers::grab`). Per environment, so a user spread over many environments
//! gets the limit in each: looser than Redis's one count, never unlimited.

use std::{
    collections::HashMap,
    hash::Hash,
    sync::Mutex,
    time::{Duration, Instant},
};

/// Past this many keys the counts whose window has ended are dropped (a key lives one window).
const PRUNE_AT: usize = 10_000;
/// A bound on memory whatever the traffic: past it after pruning, every count starts afresh.
const MOST_KEYS: usize = 200_000;

pub struct WindowCounts<K> {
    counts: Mutex<Counts<K>>,
}

struct Counts<K> {
    by_key: HashMap<K, Window>,
    /// How many keys before the next prune: twice what the last one kept, so pruning costs a
    /// constant per count however many keys live.
    prune_at: usize,
}

#[derive(Clone, Copy)]
struct Window {
    ends: Instant,
    count: u32,
}

impl<K> Default for WindowCounts<K> {
    fn default() -> Self {
        Self { counts: Mutex::new(Counts { by_key: HashMap::new(), prune_at: PRUNE_AT }) }
    }
}

impl<K: Hash + Eq> WindowCounts<K> {
    /// Counts one request of `key` at `now` in a window of `window` that starts with the key's
    /// first request; `Some(wait)` when it is over `limit` (the wait until the window ends).
    pub fn count(&self, key: K, limit: u32, window: Duration, now: Instant) -> Option<Duration> {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        if counts.by_key.len() >= counts.prune_at {
            counts.by_key.retain(|_, w| w.ends > now);
            if counts.by_key.len() >= MOST_KEYS {
                counts.by_key.clear();
            }
            counts.prune_at = (counts.by_key.len() * 2).clamp(PRUNE_AT, MOST_KEYS);
        }
        let w = counts.by_key.entry(key).or_insert(Window { ends: now + window, count: 0 });
        if w.ends <= now {
            *w = Window { ends: now + window, count: 0 };
        }
        w.count = w.count.saturating_add(1);
        (w.count > limit).then(|| w.ends - now)
    }

    /// How many keys are counted now (tests).
    pub fn len(&self) -> usize {
        self.counts.lock().unwrap_or_else(|p| p.into_inner()).by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_over_its_limit_waits_for_its_window_to_end() {
        let counts = WindowCounts::default();
        let (t0, second) = (Instant::now(), Duration::from_secs(1));
        for _ in 0..5 {
            assert_eq!(counts.count("ada", 5, second, t0), None);
        }
        assert_eq!(counts.count("ada", 5, second, t0 + Duration::from_millis(400)), Some(Duration::from_millis(600)));
        assert_eq!(counts.count("bob", 5, second, t0), None, "each key its own count");
        assert_eq!(counts.count("ada", 5, second, t0 + second), None, "a new window");
    }

    #[test]
    fn memory_stays_bounded_whatever_the_keys() {
        let counts = WindowCounts::default();
        let (t0, ms) = (Instant::now(), Duration::from_millis(1));
        for i in 0..(PRUNE_AT as u32 * 3) {
            counts.count(i, 5, ms, t0 + ms * i);
        }
        assert!(counts.len() <= 2 * PRUNE_AT, "ended windows are dropped: {}", counts.len());
        for i in 0..(MOST_KEYS as u32 + 10) {
            counts.count(i, 5, Duration::from_secs(60), t0);
        }
        assert!(counts.len() <= MOST_KEYS, "{}", counts.len());
    }
}
