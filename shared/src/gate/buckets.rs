//! A sharded event's buckets (docs/DESIGN.md section 6, "Buckets"): which buckets an event has, as
//! its cache says, and the take from a sibling that finishes a grab whose home bucket is empty
//! (`take.lua` at the sibling, `settle.lua` at home).

use std::{
    collections::HashMap,
    sync::{LazyLock, Mutex},
};

use redis::AsyncCommands;

use super::{Gate, GateError, cache_script, keys, link::LinkConn, opening_arg};
use crate::domain::{EventId, OrderId, UserId};

/// The sibling's step as Redis runs it (the tests that stop a grab between its steps run it too).
pub const TAKE_SOURCE: &str = cache_script!("take.lua", opening = ARGV[3], lasting);
static TAKE_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(TAKE_SOURCE));
static CACHED_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(cache_script!("cached.lua", opening = ARGV[1])));
static SETTLE_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(cache_script!("settle.lua", opening = ARGV[7])));

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

/// A take from a sibling under way: whose, for which order, and the sibling asked now.
pub(super) struct TakeUnderWay<'a> {
    pub user: &'a UserId,
    pub order: &'a OrderId,
    pub from: u16,
}

/// What a take from a sibling left the user with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Settled {
    /// The number is the user's: their holding and the order in the outbox at home.
    Granted(crate::domain::TicketNo),
    /// The sibling had none left: marked for the next one.
    Next(u16),
    SoldOut,
    /// Settled before (a concurrent request, or reconcile): what the user holds now, as grab.lua
    /// says it (`ALREADY:...` or `CANCELLED:...`).
    Before(String),
    /// No such take under way: the cache was rebuilt meanwhile.
    Gone,
    /// The home or the sibling is not cached in this history.
    NotCached(&'static str),
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

    /// The sibling's step: a number for `order`, or none (`take.lua`). `Err(code)` when the
    /// sibling is not cached in this history.
    pub(super) async fn take(
        &self,
        conn: &mut LinkConn,
        sibling: &keys::Bucket,
        order: &OrderId,
        user: &UserId,
    ) -> Result<Result<Option<u32>, &'static str>, GateError> {
        let reply: String = TAKE_SCRIPT
            .key(keys::meta(sibling))
            .key(keys::seats(sibling))
            .key(keys::taken(sibling))
            .arg(order.as_str())
            .arg(user.as_str())
            .arg(opening_arg(conn))
            .invoke_async(conn)
            .await?;
        Ok(match reply.as_str() {
            "TAKEN:-" => Ok(None),
            "NOT_FOUND" => Err("NOT_FOUND"),
            "STALE" => Err("STALE"),
            _ => match reply.strip_prefix("TAKEN:").and_then(|n| n.parse().ok()) {
                Some(n) => Ok(Some(n)),
                None => return Err(GateError::Protocol(format!("take reply {reply:?}"))),
            },
        })
    }

    /// Home's step (`settle.lua`): the number taken becomes the user's holding, or the mark
    /// moves on to `next`, or the grab is refused.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn settle(
        &self,
        conn: &mut LinkConn,
        home: &keys::Bucket,
        user: &UserId,
        order: &OrderId,
        from: u16,
        taken: Option<u32>,
        next: Option<u16>,
        refusal: &str,
    ) -> Result<Settled, GateError> {
        let reply: String = SETTLE_SCRIPT
            .key(keys::meta(home))
            .key(keys::outbox(home))
            .key(keys::taking(home))
            .arg(keys::user_field(user))
            .arg(order.as_str())
            .arg(from)
            .arg(taken.map_or_else(|| "-".to_owned(), |n| n.to_string()))
            .arg(next.map(|k| k.to_string()).unwrap_or_default())
            .arg(refusal)
            .arg(opening_arg(conn))
            .invoke_async(conn)
            .await?;
        let bad = || GateError::Protocol(format!("settle reply {reply:?}"));
        let (code, rest) = reply.split_once(':').unwrap_or((reply.as_str(), ""));
        Ok(match code {
            "OK" => Settled::Granted(crate::domain::TicketNo::new(rest.parse().map_err(|_| bad())?)),
            "TAKE" => Settled::Next(rest.parse().map_err(|_| bad())?),
            "SOLD_OUT" => Settled::SoldOut,
            "ALREADY" | "CANCELLED" => Settled::Before(reply.clone()),
            "GONE" => Settled::Gone,
            "NOT_FOUND" => Settled::NotCached("NOT_FOUND"),
            "STALE" => Settled::NotCached("STALE"),
            _ => return Err(bad()),
        })
    }

    /// Drives a take under way to its end: from `from`, then the siblings in `rest` while each
    /// has none left; `refusal` is the counter written when none had one. Every step may be asked again, so a retry or reconcile finishing a take
    /// that another request started changes nothing twice.
    pub(super) async fn finish_take(
        &self,
        conn: &mut LinkConn,
        buckets: &keys::Buckets,
        take: TakeUnderWay<'_>,
        rest: &[u16],
        refusal: &str,
    ) -> Result<Settled, GateError> {
        let TakeUnderWay { user, order, mut from } = take;
        let home = buckets.home(user);
        let mut rest = rest.iter().copied().filter(|&k| k != home.index());
        loop {
            let sibling = buckets.get(from).ok_or_else(|| GateError::Protocol(format!("no bucket {from}")))?;
            let taken = match self.take(conn, sibling, order, user).await? {
                Ok(taken) => taken,
                Err(code) => return Ok(Settled::NotCached(code)),
            };
            let next = if taken.is_none() { rest.find(|&k| k != from) } else { None };
            match self.settle(conn, home, user, order, from, taken, next, refusal).await? {
                Settled::Next(k) => from = k,
                settled => return Ok(settled),
            }
        }
    }
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

static RETURN_TAKE_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("return_take.lua")));

/// How old a sibling's record of a number it gave must be before reconcile may put the number
/// back when no mark at home names its order any more: longer than any grab request lives (the
/// grab function's timeout is 6 s), so no request still driving that order can settle it after.
pub const STRAY_TAKE_AGE: std::time::Duration = std::time::Duration::from_secs(120);

/// What reconcile did to a sharded event's takes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct TakesTidied {
    /// Takes left under way by a grab that stopped (a crash, a timeout), finished: the order is in
    /// the outbox at home, or the user refused SOLD_OUT.
    pub settled: u32,
    /// Numbers a sibling gave to a take that can no longer be settled, put back on sale there.
    pub returned: u32,
}

impl Gate {
    /// Reconcile's care of a sharded event's takes (nothing for an unsharded one): every take under
    /// way for longer than `settle_age` is finished, as the grab would have; every number a sibling
    /// gave more than `stray_age` ago ([`STRAY_TAKE_AGE`]) to a take whose mark is gone is put back.
    pub async fn tidy_takes(
        &self,
        event: &EventId,
        settle_age: std::time::Duration,
        stray_age: std::time::Duration,
    ) -> Result<TakesTidied, GateError> {
        let buckets = self.buckets(event).await?;
        let mut tidied = TakesTidied::default();
        if !buckets.is_sharded() {
            return Ok(tidied);
        }
        let mut conn = self.link.conn().await?;
        let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(&mut conn).await?;
        let now = secs * 1000 + micros / 1000;
        let older_than = |order: &OrderId, age: std::time::Duration| {
            order.created_ms().is_none_or(|ms| ms <= now - age.as_millis() as i64)
        };
        for home in buckets.iter() {
            let under_way: Vec<(String, String)> = conn.hgetall(keys::taking(home)).await?;
            for (order, head) in under_way {
                let Ok(order) = OrderId::parse(&order) else { continue };
                if !older_than(&order, settle_age) {
                    continue;
                }
                let user = crate::domain::order::MessageHead::user_of(&head)
                    .map_err(|e| GateError::Protocol(format!("a take's head: {e}")))?;
                let field: Option<String> = conn.hget(keys::meta(home), keys::user_field(&user)).await?;
                match field.as_deref().and_then(|f| under_way_from(f, &order)) {
                    Some(from) => {
                        let rest = siblings(&buckets, home.index(), &order);
                        let take = TakeUnderWay { user: &user, order: &order, from };
                        // A refusal here counts as one in a window that has ended.
                        let refusal = format!("#{}:1", super::script_time(now));
                        let settled = self.finish_take(&mut conn, &buckets, take, &rest, &refusal).await?;
                        if matches!(settled, Settled::Granted(_) | Settled::SoldOut) {
                            tidied.settled += 1;
                        }
                    }
                    // The mark went without its head (nothing writes that): drop the head.
                    None => conn.hdel::<_, _, ()>(keys::taking(home), order.as_str()).await?,
                }
            }
        }
        for sibling in buckets.iter() {
            let given: Vec<(String, String)> = conn.hgetall(keys::taken(sibling)).await?;
            for (order, record) in given {
                let Ok(order) = OrderId::parse(&order) else { continue };
                let Some((n, user)) = record.split_once(':') else { continue };
                let (Ok(n), Ok(user)) = (n.parse::<u32>(), UserId::parse(user)) else { continue };
                if !older_than(&order, stray_age) {
                    continue;
                }
                let field: Option<String> = conn.hget(keys::meta(buckets.home(&user)), keys::user_field(&user)).await?;
                let kept = field.as_deref().is_some_and(|f| {
                    f == format!("{order}:{n}") || f == keys::cancelled(&order) || under_way_from(f, &order).is_some()
                });
                if kept {
                    continue;
                }
                let put_back = return_take(&mut conn, sibling, &order, &record, n).await?;
                if put_back == 1 {
                    tracing::warn!(event_id = %event, ticket_no = n, "a number given to a take that cannot settle is on sale again");
                    tidied.returned += put_back;
                }
            }
        }
        Ok(tidied)
    }
}

/// Puts back a number `bucket` gave to `order` (`return_take.lua`), only if its record is still
/// `record`: 1 when put back, 0 when the record had changed.
pub(super) async fn return_take(
    conn: &mut LinkConn,
    bucket: &keys::Bucket,
    order: &OrderId,
    record: &str,
    n: u32,
) -> Result<u32, GateError> {
    Ok(RETURN_TAKE_SCRIPT
        .key(keys::seats(bucket))
        .key(keys::taken(bucket))
        .arg(order.as_str())
        .arg(record)
        .arg(n)
        .invoke_async(conn)
        .await?)
}

/// The sibling a user's field says their take of `order` is under way from (`@<bucket>:<order>`).
fn under_way_from(field: &str, order: &OrderId) -> Option<u16> {
    let (k, of) = field.strip_prefix('@')?.split_once(':')?;
    (of == order.as_str()).then(|| k.parse().ok()).flatten()
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

    #[test]
    fn a_users_field_names_the_take_under_way() {
        let order = OrderId::generate();
        assert_eq!(under_way_from(&keys::taking_from(2, &order), &order), Some(2));
        assert_eq!(under_way_from(&keys::taking_from(2, &order), &OrderId::generate()), None);
        assert_eq!(under_way_from(&format!("{order}:7"), &order), None);
        assert_eq!(under_way_from("#000001795619000000:3", &order), None);
    }
}
