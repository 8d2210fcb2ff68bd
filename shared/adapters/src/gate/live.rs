//! What the organiser's live page reads of a sale (docs/DESIGN.md section 12): the cache's three
//! counters in one round trip, and the grab outcomes the tallies wrote. Nothing here runs a
//! script or touches a user's field: the grab path pays nothing for it.

use std::collections::BTreeMap;

use super::{Gate, GateError, keys, opening_on};
use domain::EventId;

/// The sale now, as the cache says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaleNow {
    /// Numbers on sale.
    pub remaining: u64,
    /// Orders decided and not yet stored (the outbox): the queue's depth as the gate sees it.
    pub in_flight: u64,
    /// Users on the waitlist.
    pub waiting: u64,
}

/// Grab outcomes by second: unix second -> outcome code -> count.
pub type GrabCounts = BTreeMap<i64, BTreeMap<String, u64>>;

impl Gate {
    /// `None` when the event is not cached in this history (not released, expired, or lost).
    pub async fn sale_now(&self, event: &EventId) -> Result<Option<SaleNow>, GateError> {
        let mut conn = self.link.conn().await?;
        let mut now = SaleNow { remaining: 0, in_flight: 0, waiting: 0 };
        for b in self.buckets(event).await?.iter() {
            let opening = opening_on(&mut conn, b).await?;
            let (cached, remaining, in_flight, waiting): (bool, u64, u64, u64) = redis::pipe()
                .hexists(keys::meta(b), &opening)
                .llen(keys::seats(b))
                .hlen(keys::outbox(b))
                .zcard(keys::wait(b))
                .query_async(&mut conn)
                .await?;
            if !cached {
                return Ok(None);
            }
            now.remaining += remaining;
            now.in_flight += in_flight;
            now.waiting += waiting;
        }
        Ok(Some(now))
    }

    /// Adds counted outcomes to their minutes' tallies in the writer's `shard`: one `HINCRBY` per
    /// (second, code) and an expiry per minute, in one pipeline per minute key.
    pub async fn add_grab_counts(&self, event: &EventId, shard: u16, counts: &GrabCounts) -> Result<(), GateError> {
        let mut conn = self.link.conn().await?;
        let mut by_minute: BTreeMap<i64, Vec<(String, u64)>> = BTreeMap::new();
        for (second, codes) in counts {
            for (code, n) in codes {
                by_minute.entry(second.div_euclid(60)).or_default().push((format!("{second}:{code}"), *n));
            }
        }
        for (minute, fields) in by_minute {
            let key = keys::grab_tally(event, shard, minute);
            let mut pipe = redis::pipe();
            for (field, n) in &fields {
                pipe.hincr(&key, field, *n).ignore();
            }
            pipe.expire(&key, keys::TALLY_KEPT.as_secs() as i64).ignore();
            let () = pipe.query_async(&mut conn).await?;
        }
        Ok(())
    }

    /// The outcomes counted in the seconds `from..=until`, every shard's (one pipeline each: a
    /// shard's keys share a slot).
    pub async fn grab_counts(&self, event: &EventId, from: i64, until: i64) -> Result<GrabCounts, GateError> {
        let conn = self.link.conn().await?;
        let shards = (0..keys::TALLY_SHARDS).map(|shard| {
            let mut conn = conn.clone();
            let mut pipe = redis::pipe();
            for minute in from.div_euclid(60)..=until.div_euclid(60) {
                pipe.hgetall(keys::grab_tally(event, shard, minute));
            }
            async move { pipe.query_async::<Vec<Vec<(String, u64)>>>(&mut conn).await }
        });
        let minutes = futures::future::try_join_all(shards).await?;
        let mut counts = GrabCounts::new();
        for (field, n) in minutes.into_iter().flatten().flatten() {
            let Some((second, code)) = field.split_once(':') else { continue };
            let Ok(second) = second.parse::<i64>() else { continue };
            if (from..=until).contains(&second) {
                *counts.entry(second).or_default().entry(code.to_owned()).or_default() += n;
            }
        }
        Ok(counts)
    }
}
