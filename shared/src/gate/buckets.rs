//! A sharded event's buckets (docs/DESIGN.md section 6, "Buckets"): which buckets an event has, as
//! its cache says, and the numbers that move from one bucket to another: a home with none left
//! asks a sibling for some (`move_out.lua` there, `move_in.lua` at home), and a late order's number
//! free in another bucket is claimed the same way (`admit.lua` at home takes it in). A number is
//! never a user's while it moves, so a user's field holds only what it holds on an unsharded event.

use std::{
    collections::HashMap,
    sync::{LazyLock, Mutex},
};

use redis::AsyncCommands;

use super::{Gate, GateError, cache_script, keys, link::LinkConn, opening_arg};
use crate::domain::{EventId, OrderId, TicketNo, UserId};

/// The first step of a move as Redis runs it (the tests that stop a move between its steps run it
/// too).
pub const MOVE_OUT_SOURCE: &str = cache_script!("move_out.lua", opening = ARGV[1], lasting);
static MOVE_OUT_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(MOVE_OUT_SOURCE));
pub const MOVE_IN_SOURCE: &str = cache_script!("move_in.lua", opening = ARGV[1], lasting);
static MOVE_IN_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(MOVE_IN_SOURCE));
static CACHED_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(cache_script!("cached.lua", opening = ARGV[1])));

/// The most numbers one move takes from a sibling (half of what it has free, up to this): enough
/// that a crowd homed at an empty bucket is served by a few moves, few enough that the sibling's
/// own crowd keeps most of its numbers.
pub const MOVE_MOST: u32 = 64;

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

/// One move's record at the bucket the numbers left (`keys::moving`):
/// `<generation>|<to>|<ms>|<n>,<n>,...|<user>|<order>` (the last two only for a late order's claim).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Move {
    pub generation: String,
    pub to: u16,
    /// When the numbers left (the source's clock, epoch ms).
    pub at_ms: i64,
    pub numbers: Vec<TicketNo>,
    /// A late order's claim: the number is for this user's order, at their home.
    pub claim: Option<(UserId, OrderId)>,
}

impl Move {
    pub(super) fn parse(record: &str) -> Option<Self> {
        let mut parts = record.split('|');
        let generation = parts.next()?.to_owned();
        let to = parts.next()?.parse().ok()?;
        let at_ms = parts.next()?.parse().ok()?;
        let numbers = parts.next()?.split(',').map(|n| n.parse().ok().map(TicketNo::new)).collect::<Option<_>>()?;
        let claim = match (parts.next().unwrap_or(""), parts.next().unwrap_or("")) {
            ("", _) => None,
            (user, order) => Some((UserId::parse(user).ok()?, OrderId::parse(order).ok()?)),
        };
        Some(Self { generation, to, at_ms, numbers, claim })
    }

    fn numbers_arg(&self) -> String {
        self.numbers.iter().map(|n| n.get().to_string()).collect::<Vec<_>>().join(",")
    }
}

/// What asking a sibling for numbers came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Moved {
    /// This many numbers are on sale at home now.
    Arrived(usize),
    /// The sibling had none free.
    Empty,
    /// A bucket is not cached in this history, or was laid down again meanwhile: rebuild first.
    NotCached,
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

    /// The first step of a move: numbers leave `from` for bucket `to` (`move_out.lua`), any free
    /// ones or, for a late order's claim, that very number. Asked again with the same id, the
    /// same record.
    pub(super) async fn move_out(
        &self,
        conn: &mut LinkConn,
        from: &keys::Bucket,
        id: &str,
        to: u16,
        claim: Option<(&UserId, &OrderId, TicketNo)>,
    ) -> Result<MoveOut, GateError> {
        let (number, claimant) = match claim {
            Some((user, order, n)) => (n.get().to_string(), format!("{user}|{order}")),
            None => (String::new(), String::new()),
        };
        let reply: String = MOVE_OUT_SCRIPT
            .key(keys::meta(from))
            .key(keys::seats(from))
            .key(keys::moving(from))
            .arg(opening_arg(conn))
            .arg(id)
            .arg(to)
            .arg(MOVE_MOST)
            .arg(number)
            .arg(claimant)
            .invoke_async(conn)
            .await?;
        let bad = || GateError::Protocol(format!("move_out reply {reply:?}"));
        Ok(match reply.split_once(':') {
            Some(("MOVING", record)) => MoveOut::Moving(Move::parse(record).ok_or_else(bad)?),
            Some(("NONE", _)) => MoveOut::Empty,
            _ if matches!(reply.as_str(), "NOT_FOUND" | "STALE") => MoveOut::NotCached,
            _ => return Err(bad()),
        })
    }

    /// The second and last steps of a move that is not a claim: its numbers go on sale at `to`
    /// (`move_in.lua`, once), then its record leaves `from`. Asked again, nothing is added twice.
    pub(super) async fn move_in(
        &self,
        conn: &mut LinkConn,
        buckets: &keys::Buckets,
        from: &keys::Bucket,
        id: &str,
        moving: &Move,
    ) -> Result<Moved, GateError> {
        let to = buckets.get(moving.to).ok_or_else(|| GateError::Protocol(format!("no bucket {}", moving.to)))?;
        let reply: String = MOVE_IN_SCRIPT
            .key(keys::meta(to))
            .key(keys::seats(to))
            .key(keys::moved(to))
            .arg(opening_arg(conn))
            .arg(id)
            .arg(&moving.generation)
            .arg(moving.numbers_arg())
            .invoke_async(conn)
            .await?;
        match reply.as_str() {
            "ARRIVED" => {}
            // Laid down again since: the rebuild laid every number afresh, this record with them.
            "GONE" => return Ok(Moved::NotCached),
            "NOT_FOUND" | "STALE" => return Ok(Moved::NotCached),
            _ => return Err(GateError::Protocol(format!("move_in reply {reply:?}"))),
        }
        let _: u32 = conn.hdel(keys::moving(from), id).await?;
        Ok(Moved::Arrived(moving.numbers.len()))
    }

    /// Numbers for an empty `home`, from `sibling`: a move's three steps.
    pub(super) async fn refill(
        &self,
        conn: &mut LinkConn,
        buckets: &keys::Buckets,
        home: &keys::Bucket,
        sibling: &keys::Bucket,
    ) -> Result<Moved, GateError> {
        let id = uuid::Uuid::now_v7().to_string();
        match self.move_out(conn, sibling, &id, home.index(), None).await? {
            MoveOut::Moving(moving) => self.move_in(conn, buckets, sibling, &id, &moving).await,
            MoveOut::Empty => Ok(Moved::Empty),
            MoveOut::NotCached => Ok(Moved::NotCached),
        }
    }
}

/// What a move's first step answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum MoveOut {
    Moving(Move),
    Empty,
    NotCached,
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
        self.finish_moves(&mut conn, &buckets, before).await
    }

    /// Finishes every move under way whose numbers left before `before_ms` (any move: `i64::MAX`),
    /// over every bucket: safe at any moment, each move's numbers arriving once. A grab finds no
    /// number anywhere, or a late order's number nowhere free, only after this found nothing to
    /// finish: numbers on their way are not sold out. Returns how many it finished.
    pub(super) async fn finish_moves(
        &self,
        conn: &mut LinkConn,
        buckets: &keys::Buckets,
        before_ms: i64,
    ) -> Result<u32, GateError> {
        let mut finished = 0;
        for from in buckets.iter() {
            let mut cursor = 0u64;
            loop {
                let (next, page): (u64, Vec<(String, String)>) = redis::cmd("HSCAN")
                    .arg(keys::moving(from))
                    .arg(cursor)
                    .arg("COUNT")
                    .arg(200)
                    .query_async(conn)
                    .await?;
                for (id, record) in page {
                    let Some(moving) = Move::parse(&record) else {
                        tracing::warn!(record, "a move's record is malformed; left as it is");
                        continue;
                    };
                    if moving.at_ms > before_ms {
                        continue;
                    }
                    let arrived = match &moving.claim {
                        None => matches!(self.move_in(conn, buckets, from, &id, &moving).await?, Moved::Arrived(_)),
                        Some(_) => matches!(
                            self.claim_in(conn, buckets, from, &id, &moving).await?,
                            super::admit::ClaimIn::Admitted(_)
                        ),
                    };
                    finished += u32::from(arrived);
                }
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        Ok(finished)
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

    #[test]
    fn a_moves_record_reads_back_whole() {
        let order = OrderId::generate();
        let refill = Move::parse("0199a0b0-gen|2|1795619000000|7,8,9|").unwrap();
        assert_eq!(
            refill,
            Move {
                generation: "0199a0b0-gen".into(),
                to: 2,
                at_ms: 1_795_619_000_000,
                numbers: vec![TicketNo::new(7), TicketNo::new(8), TicketNo::new(9)],
                claim: None,
            }
        );
        assert_eq!(refill.numbers_arg(), "7,8,9");
        let claim = Move::parse(&format!("g|0|5|12|ada@x|{order}")).unwrap();
        assert_eq!(claim.claim, Some((UserId::parse("ada@x").unwrap(), order)));
        for bad in ["", "g|x|5|1|", "g|0|5||", "g|0|5|1|ada|not-an-order", "g|0"] {
            assert_eq!(Move::parse(bad), None, "{bad:?}");
        }
    }
}
