//! A sharded event's numbers moving from one bucket to another (docs/DESIGN.md section 6,
//! "Buckets"): a home with none left asks a sibling for some (`move_out.lua` there, `move_in.lua`
//! at home, then the record goes), and a late order's number free in another bucket is claimed
//! the same way (its arrival is `admit.lua` at home: `admit`). A number is never a user's while it
//! moves, so a user's field holds only what it holds on an unsharded event. Every step may be
//! asked again, by the move's driver or by anyone finishing it.

use std::sync::LazyLock;

use redis::AsyncCommands;

use super::{Gate, GateError, cache_script, keys, link::LinkConn, opening_arg};
use domain::{OrderId, TicketNo, UserId};

/// The first step of a move as Redis runs it (the tests that stop a move between its steps run it
/// too).
pub const MOVE_OUT_SOURCE: &str = cache_script!("move_out.lua", opening = ARGV[1], lasting);
static MOVE_OUT_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(MOVE_OUT_SOURCE));
pub const MOVE_IN_SOURCE: &str = cache_script!("move_in.lua", opening = ARGV[1], lasting);
static MOVE_IN_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(MOVE_IN_SOURCE));

/// The most numbers one move takes from a sibling (half of what it has free, up to this): enough
/// that a crowd homed at an empty bucket is served by a few moves, few enough that the sibling's
/// own crowd keeps most of its numbers.
pub const MOVE_MOST: u32 = 64;

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

#[cfg(test)]
mod tests {
    use super::*;

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
