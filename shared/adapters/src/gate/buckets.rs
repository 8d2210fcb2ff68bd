//! A sharded event's buckets (docs/DESIGN.md section 6, "Buckets"): which buckets an event has, as
//! its cache says, whether they are cached, the order a grab asks its siblings in, and reconcile's
//! care of the numbers left moving between them (the moves themselves: `moves`).

use std::{
    collections::HashMap,
    sync::{LazyLock, Mutex},
};

use super::{Gate, GateError, cache_script, keys, link::LinkConn, opening_arg};
use domain::{EventId, OrderId};

static CACHED_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(cache_script!("cached.lua", opening = ARGV[1])));

/// How old a move must be before reconcile finishes it (any age is safe: `move_in.lua` adds a
/// move's numbers once; this only leaves a move whose grab is still driving it alone).
pub const MOVE_SETTLE_AGE: std::time::Duration = std::time::Duration::from_secs(10);

/// The events whose bucket count this environment has read (it never changes for an event).
#[derive(Default)]
pub(super) struct BucketBook {
    known: Mutex<HashMap<EventId, keys::Buckets>>,
}

impl BucketBook {
    fn get(&self, event: &EventId) -> Option<keys::Buckets> {
        self.known.lock().unwrap_or_else(|p| p.into_inner()).get(event).cloned()
    }

    pub(super) fn learn(&self, event: &EventId, count: u16) -> keys::Buckets {
        let buckets = keys::Buckets::of(event, count);
        self.known.lock().unwrap_or_else(|p| p.into_inner()).insert(event.clone(), buckets.clone());
        buckets
    }
}

impl Gate {
    /// The event's buckets: known in this environment, or read from bucket 0's meta (`buckets`;
    /// absent in a cache laid down before buckets existed: one). Not remembered while the cache is
    /// missing, so a rebuild's count is read after it.
    pub async fn buckets(&self, event: &EventId) -> Result<keys::Buckets, GateError> {
        if let Some(known) = self.buckets.get(event) {
            return Ok(known);
        }
        let (count, capacity): (Option<u16>, Option<String>) = redis::cmd("HMGET")
            .arg(keys::meta(event))
            .arg(&["buckets", "capacity"])
            .query_async(&mut self.link.conn().await?)
            .await?;
        Ok(match capacity {
            Some(_) => self.buckets.learn(event, count.unwrap_or(1)),
            None => keys::Buckets::of(event, 1),
        })
    }

    /// Whether every bucket but bucket 0 is cached in this history: one round trip each
    /// (`cached.lua`), all at once.
    pub(super) async fn siblings_cached(&self, conn: &LinkConn, buckets: &keys::Buckets) -> Result<bool, GateError> {
        let asked = buckets.iter().skip(1).map(|b| {
            let mut conn = conn.clone();
            async move {
                let cached: i64 =
                    CACHED_SCRIPT.key(keys::meta(b)).arg(opening_arg(&conn)).invoke_async(&mut conn).await?;
                Ok::<_, GateError>(cached == 1)
            }
        });
        Ok(futures::future::try_join_all(asked).await?.into_iter().all(|cached| cached))
    }
}

/// What [`Gate::bucket_masters`] names for a slot no master serves in the map it read.
pub const NO_MASTER: &str = "no master";

impl Gate {
    /// The master that holds each of the event's buckets, in bucket order, as the cluster's slot
    /// map says now (`CLUSTER SLOTS`: "host:port" of each slot range's master); `None` on one
    /// server, where every bucket is on it by design.
    pub async fn bucket_masters(&self, buckets: &keys::Buckets) -> Result<Option<Vec<String>>, GateError> {
        if !self.link.is_cluster() {
            return Ok(None);
        }
        let map: redis::Value = redis::cmd("CLUSTER").arg("SLOTS").query_async(&mut self.link.conn().await?).await?;
        let ranges = slot_ranges(&map);
        Ok(Some(
            buckets
                .iter()
                .map(|b| {
                    let slot = keys::slot(&b.to_string());
                    ranges
                        .iter()
                        .find(|(from, to, _)| (*from..=*to).contains(&slot))
                        .map_or_else(|| NO_MASTER.to_owned(), |(_, _, master)| master.clone())
                })
                .collect(),
        ))
    }
}

/// `CLUSTER SLOTS`' ranges: (first slot, last slot, "host:port" of its master).
fn slot_ranges(map: &redis::Value) -> Vec<(u16, u16, String)> {
    use redis::Value::{Array, BulkString, Int, SimpleString};
    let Array(ranges) = map else { return Vec::new() };
    ranges
        .iter()
        .filter_map(|range| {
            let Array(fields) = range else { return None };
            let (Some(Int(from)), Some(Int(to)), Some(Array(master))) = (fields.first(), fields.get(1), fields.get(2))
            else {
                return None;
            };
            let host = match master.first()? {
                BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                SimpleString(s) => s.clone(),
                _ => return None,
            };
            let Some(Int(port)) = master.get(1) else { return None };
            Some((u16::try_from(*from).ok()?, u16::try_from(*to).ok()?, format!("{host}:{port}")))
        })
        .collect()
}

/// The siblings a grab homed at `home` asks, in order: every other bucket once, starting at an
/// offset drawn from the order id, so a crowd whose homes ran out spreads over the siblings.
pub(super) fn siblings(buckets: &keys::Buckets, home: u16, order: &OrderId) -> Vec<u16> {
    let n = buckets.count();
    let tail = order.as_str().rsplit('-').next().unwrap_or_default();
    let draw = u16::from_str_radix(&tail[tail.len().saturating_sub(4)..], 16).unwrap_or(0);
    let start = draw % n.max(1);
    (0..n).map(|i| (start + i) % n).filter(|&k| k != home).collect()
}

impl Gate {
    /// Reconcile's care of a sharded event's moves (nothing for an unsharded event): every move
    /// whose numbers left a bucket more than `age` ago ([`MOVE_SETTLE_AGE`]) and are not yet at
    /// their destination (the process driving it stopped) is finished, as its driver would have:
    /// numbers on sale there, or a late order's claim taken in at its user's home. Each bucket's
    /// records are read with `HSCAN`. Returns how many it finished.
    pub async fn tidy_moves(&self, event: &EventId, age: std::time::Duration) -> Result<u32, GateError> {
        let buckets = self.buckets(event).await?;
        if !buckets.is_sharded() {
            return Ok(0);
        }
        let mut conn = self.link.conn().await?;
        let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(&mut conn).await?;
        let before = secs * 1000 + micros / 1000 - age.as_millis() as i64;
        Ok(self.finish_moves(&mut conn, &buckets, before).await?.arrived)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grab_asks_every_other_bucket_once_from_an_offset_of_its_own() {
        let buckets = keys::Buckets::of(&EventId::parse("lecture").unwrap(), 4);
        let mut firsts = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let order = OrderId::generate();
            let asked = siblings(&buckets, 2, &order);
            let mut sorted = asked.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, [0, 1, 3], "every sibling once, never the home");
            assert_eq!(siblings(&buckets, 2, &order), asked, "the same order asks in the same order");
            firsts.insert(asked[0]);
        }
        assert_eq!(firsts.len(), 3, "the crowd spreads over the siblings");
    }
}
