//! The waitlist in Redis: joining it (`wait.lua`: one place per user, in arrival order, or a
//! held-back number at once), a user's place, and closing it (`close.lua`).

use std::sync::LazyLock;

use redis::AsyncCommands;

use super::{
    Gate, GateError, Written, cache_script,
    handing::{Hand, HandedOn},
    keys,
    link::LinkConn,
    opening_arg, split_holding,
};
use domain::{EventId, Holding, OrderId, TicketNo, UserId, order::WaitHead};

/// The join as Redis runs it (a test stops a join after it, as a process killed there would).
pub const WAIT_SOURCE: &str = cache_script!("wait.lua", opening = ARGV[5], lasting);
static WAIT_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(WAIT_SOURCE));

static CLOSE_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(include_str!("close.lua")));

static IN_LINE_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(cache_script!("in_line.lua", opening = ARGV[1])));

/// Whether a user's place is in the line as it is laid down now (`Gate::in_line`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InLine {
    In,
    Out,
    /// The line is not cached in this history (a rebuild under way, or lost): not known yet.
    NotCached,
}

/// Where a user stands on the waitlist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waitlisted {
    /// On the list now, at this position (1 is next), with this place (the durable order key).
    Joined {
        position: u64,
        place: u64,
    },
    /// On the list already.
    Waiting {
        position: u64,
        place: u64,
    },
    /// A number returned while nobody waited is the user's at once: a new order, in the outbox.
    Promoted {
        ticket_no: TicketNo,
    },
    /// The user holds an order (a grab, or a promotion): nothing to wait for.
    Holds(Holding),
    /// The user cancelled their order: one ticket per user.
    Cancelled,
    NotStarted,
    /// The cancellation window is over: no ticket can come back.
    Closed,
    /// Tickets are on sale: grab one.
    NotSoldOut,
    Full,
    NotCached,
}

/// A user's place, as `GET /events/{id}/waitlist` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitlistPlace {
    Waiting { position: u64, waiting: u64 },
    Holds(Holding),
    NotWaiting,
}

/// A user joining the waitlist, as the script takes them.
pub struct Join<'a> {
    pub event: &'a EventId,
    pub user: &'a UserId,
    pub head: &'a WaitHead,
    pub clock_ms: i64,
    /// The order id and creation time an at-once promotion gets.
    pub promotion: &'a OrderId,
    pub now: &'a str,
}

impl Gate {
    /// Puts a user on the waitlist (once; in arrival order; within its size), or after the sale's
    /// end hands them a returned number nobody waited for. A sharded event's line is bucket 0's:
    /// the user's field is read at their home first, and a returned number handed to a user homed
    /// elsewhere is settled there (`handing`).
    pub async fn join_waitlist(&self, j: &Join<'_>) -> Result<(Waitlisted, Written), GateError> {
        let buckets = self.buckets(j.event).await?;
        let line = buckets.get(0).expect("bucket 0");
        let home = buckets.home(j.user);
        let mut conn = self.link.conn().await?;
        let (home_field, elsewhere) = if buckets.is_sharded() {
            match self.read_field_and_stock(&conn, &buckets, j.user).await? {
                Some(found) => found,
                None => return Ok((Waitlisted::NotCached, Written { conn, key: keys::meta(home) })),
            }
        } else {
            (String::new(), 0)
        };
        let tail = WaitHead::tail(j.promotion, j.now);
        let opening = opening_arg(&conn);
        let reply: String = WAIT_SCRIPT
            .key(keys::meta(line))
            .key(keys::seats(line))
            .key(keys::wait(line))
            .key(keys::waiting(line))
            .key(keys::returned(line))
            .key(keys::outbox(line))
            .key(keys::handed(line))
            .arg(keys::user_field(j.user))
            .arg(j.user.as_str())
            .arg(j.head.as_str())
            .arg(j.clock_ms)
            .arg(opening)
            .arg(j.promotion.as_str())
            .arg(&tail)
            .arg(home_field)
            .arg(elsewhere)
            .arg(keys::joined_hand(j.promotion))
            .invoke_async(&mut conn)
            .await?;
        if let Some(handed) = reply.strip_prefix("HANDED:") {
            let bad = || GateError::Protocol(format!("wait reply {reply:?}"));
            let (n, generation) = handed.split_once(':').ok_or_else(bad)?;
            let ticket_no = TicketNo::new(n.parse().map_err(|_| bad())?);
            let message = j.head.complete(&tail, ticket_no);
            let id = keys::joined_hand(j.promotion);
            let hand =
                Hand { id: &id, ticket_no, promotion: j.promotion, now: j.now, returned_ms: j.clock_ms, generation };
            let joined = match self.hand_on(&mut conn, &buckets, &hand, Some(message)).await? {
                HandedOn::Promoted { promoted, .. } if promoted.user_id == *j.user => {
                    Waitlisted::Promoted { ticket_no }
                }
                // The user came to hold an order meanwhile (a second request of theirs): the
                // number went on to the line, and the user is told what they hold.
                HandedOn::NotCached | HandedOn::LineLost => Waitlisted::NotCached,
                _ => match self.read_field_and_stock(&conn, &buckets, j.user).await? {
                    Some((field, _)) => parse_wait_reply(&held_reply(&field))?,
                    None => Waitlisted::NotCached,
                },
            };
            return Ok((joined, Written { conn, key: keys::meta(home) }));
        }
        Ok((parse_wait_reply(&reply)?, Written { conn, key: keys::meta(line) }))
    }

    /// A sharded event's join, before the line is asked: the user's field at home (`-` for none;
    /// empty for a user homed at bucket 0, where the line's script reads it itself) and the
    /// numbers on sale in the buckets other than 0 with the moves under way in any, read at once. `None` when the home is not
    /// cached in this history.
    async fn read_field_and_stock(
        &self,
        conn: &LinkConn,
        buckets: &keys::Buckets,
        user: &UserId,
    ) -> Result<Option<(String, u64)>, GateError> {
        let home = buckets.home(user);
        let field = async {
            if home.index() == 0 {
                return Ok(Some(String::new()));
            }
            let mut conn = conn.clone();
            let opening = super::opening_on(&mut conn, home).await?;
            let (cached, field): (Option<String>, Option<String>) = redis::cmd("HMGET")
                .arg(keys::meta(home))
                .arg(&[opening, keys::user_field(user)])
                .query_async(&mut conn)
                .await?;
            Ok::<_, GateError>(cached.map(|_| field.unwrap_or_else(|| "-".to_owned())))
        };
        // The other buckets' numbers on sale, and every bucket's moves under way: numbers on
        // their way between buckets are not sold out either.
        let stock = futures::future::try_join_all(buckets.iter().map(|b| {
            let mut conn = conn.clone();
            async move {
                let (on_sale, moving): (u64, u64) =
                    redis::pipe().atomic().llen(keys::seats(b)).hlen(keys::moving(b)).query_async(&mut conn).await?;
                Ok::<u64, GateError>(if b.index() == 0 { moving } else { on_sale + moving })
            }
        }));
        let (field, stock) = futures::future::try_join(field, stock).await?;
        Ok(field.map(|f| (f, stock.into_iter().sum())))
    }

    /// The user's place on the waitlist, or the order a promotion gave them.
    pub async fn waitlist_place(&self, event: &EventId, user: &UserId) -> Result<WaitlistPlace, GateError> {
        let buckets = self.buckets(event).await?;
        let (line, home) = (buckets.get(0).expect("bucket 0"), buckets.home(user));
        let mut conn = self.link.conn().await?;
        // Read together so a promotion between them cannot hide the user; on a sharded event the
        // line first, then the home, which a promotion reaches after it leaves the line.
        let (rank, waiting, held): (Option<u64>, u64, Option<String>) = redis::pipe()
            .atomic()
            .zrank(keys::wait(line), user.as_str())
            .zcard(keys::wait(line))
            .hget(keys::meta(line), keys::user_field(user))
            .query_async(&mut conn)
            .await?;
        if let Some(rank) = rank {
            return Ok(WaitlistPlace::Waiting { position: rank + 1, waiting });
        }
        let held = if home == line { held } else { conn.hget(keys::meta(home), keys::user_field(user)).await? };
        Ok(match held {
            Some(h) if !h.starts_with(['#', '!']) => WaitlistPlace::Holds(split_holding(&h)?),
            _ => WaitlistPlace::NotWaiting,
        })
    }

    /// Whether `user`'s place is in the line, asked of the line's bucket while it is cached in this
    /// history.
    pub async fn in_line(&self, event: &EventId, user: &UserId) -> Result<InLine, GateError> {
        let buckets = self.buckets(event).await?;
        let line = buckets.get(0).expect("bucket 0");
        let mut conn = self.link.conn().await?;
        let opening = opening_arg(&conn);
        let reply: String = IN_LINE_SCRIPT
            .key(keys::meta(line))
            .key(keys::wait(line))
            .arg(opening)
            .arg(user.as_str())
            .invoke_async(&mut conn)
            .await?;
        Ok(match reply.as_str() {
            "IN" => InLine::In,
            "OUT" => InLine::Out,
            _ => InLine::NotCached,
        })
    }

    /// Whether a promotion of `user` is on its way from the line to their home (a sharded event's
    /// hand between its steps: they left the line, their home does not hold it yet).
    pub async fn promotion_under_way(&self, event: &EventId, user: &UserId) -> Result<bool, GateError> {
        Ok(self.promotion_of(event, user).await?.is_some())
    }

    /// The order a promotion under way carries to `user` ([`Self::promotion_under_way`]).
    pub async fn promotion_of(
        &self,
        event: &EventId,
        user: &UserId,
    ) -> Result<Option<domain::OrderMessage>, GateError> {
        let buckets = self.buckets(event).await?;
        if !buckets.is_sharded() {
            return Ok(None);
        }
        let line = buckets.get(0).expect("bucket 0");
        let records: Vec<String> = self.link.conn().await?.hvals(keys::handed(line)).await?;
        Ok(records.iter().filter_map(|r| domain::OrderMessage::parse(r).ok()).find(|m| m.user_id == *user))
    }

    /// Who is in the line, as laid now (reconcile's check against the durable places).
    pub async fn line(&self, event: &EventId) -> Result<Vec<UserId>, GateError> {
        let users: Vec<String> = self.link.conn().await?.zrange(keys::wait(event), 0, -1).await?;
        Ok(users.iter().filter_map(|u| UserId::parse(u).ok()).collect())
    }

    /// Reconcile's finding that the cache lost part of itself (`finding` names what: numbers in
    /// no place, durable places not in the line), kept a few minutes: whether the run before found
    /// the same. A finding made twice is no passing moment of a sale's traffic.
    pub async fn found_again(&self, event: &EventId, finding: &str) -> Result<bool, GateError> {
        let before: Option<String> = redis::cmd("SET")
            .arg(keys::suspected(event))
            .arg(finding)
            .arg("PX")
            .arg(300_000)
            .arg("GET")
            .query_async(&mut self.link.conn().await?)
            .await?;
        Ok(before.as_deref() == Some(finding))
    }

    /// Whether a repair already met `finding` (reconcile's, `remember_repaired`): a repair that did
    /// not mend it is not run again for it.
    pub async fn repaired_before(&self, event: &EventId, finding: &str) -> Result<bool, GateError> {
        let before: Option<String> = self.link.conn().await?.get(keys::repaired_finding(event)).await?;
        Ok(before.as_deref() == Some(finding))
    }

    /// Remembers the finding a repair was run for, an hour.
    pub async fn remember_repaired(&self, event: &EventId, finding: &str) -> Result<(), GateError> {
        let _: () = self.link.conn().await?.pset_ex(keys::repaired_finding(event), finding, 3_600_000).await?;
        Ok(())
    }

    /// How many wait (tests and the organiser's report).
    pub async fn waitlist_len(&self, event: &EventId) -> Result<u64, GateError> {
        Ok(redis::AsyncCommands::zcard(&mut self.link.conn().await?, keys::wait(event)).await?)
    }

    /// The waitlist of a cache an older layout wrote (which kept it only in Redis), by place.
    pub async fn older_waitlist(&self, event: &EventId) -> Result<Vec<domain::Waiter>, GateError> {
        let mut conn = self.link.conn().await?;
        let (places, heads): (Vec<(String, u64)>, std::collections::HashMap<String, String>) = redis::pipe()
            .atomic()
            .zrange_withscores(keys::wait(event), 0, -1)
            .hgetall(keys::waiting(event))
            .query_async(&mut conn)
            .await?;
        let mut waiters = Vec::new();
        for (user, place) in places {
            let Some(head) = heads.get(&user) else { continue };
            // The head is an order message without its tail: completed with any, it tells the address.
            let whole =
                format!("{head}{},\"ticket_no\":1}}", WaitHead::tail(&OrderId::generate(), "1970-01-01T00:00:00Z"));
            let message = domain::OrderMessage::parse(&whole)
                .map_err(|e| GateError::Protocol(format!("an older waitlist head: {e}")))?;
            waiters.push(domain::Waiter { user: message.user_id, email: message.email, place });
        }
        Ok(waiters)
    }

    /// Closes the event's waitlist (`close.lua`): nobody is promoted any more, and the waiting
    /// users' places and addresses leave Redis. Returns how many were still waiting there.
    pub async fn close_waitlist(&self, event: &EventId) -> Result<u64, GateError> {
        Ok(CLOSE_SCRIPT
            .key(keys::meta(event))
            .key(keys::wait(event))
            .key(keys::waiting(event))
            .invoke_async(&mut self.link.conn().await?)
            .await?)
    }
}

/// What `wait.lua` answers a user whose field holds `field` (a holding, `!`).
/// Nothing held (`-`, a counter `#`): the user may ask again (`STALE`: busy).
fn held_reply(field: &str) -> String {
    match field.as_bytes().first() {
        Some(b'!') => "CANCELLED".to_owned(),
        Some(b'-' | b'#') | None => "STALE".to_owned(),
        _ => format!("HOLDS:{field}"),
    }
}

fn parse_wait_reply(reply: &str) -> Result<Waitlisted, GateError> {
    let bad = || GateError::Protocol(format!("wait reply {reply:?}"));
    let (code, rest) = reply.split_once(':').unwrap_or((reply, ""));
    let spot = || -> Result<(u64, u64), GateError> {
        let (position, place) = rest.split_once(':').ok_or_else(bad)?;
        Ok((position.parse().map_err(|_| bad())?, place.parse().map_err(|_| bad())?))
    };
    Ok(match code {
        "JOINED" => {
            let (position, place) = spot()?;
            Waitlisted::Joined { position, place }
        }
        "WAITING" => {
            let (position, place) = spot()?;
            Waitlisted::Waiting { position, place }
        }
        "PROMOTED" => Waitlisted::Promoted { ticket_no: rest.parse().map_err(|_| bad())? },
        "HOLDS" => Waitlisted::Holds(split_holding(rest)?),
        "CANCELLED" => Waitlisted::Cancelled,
        "NOT_STARTED" => Waitlisted::NotStarted,
        "CLOSED" => Waitlisted::Closed,
        "NOT_SOLD_OUT" => Waitlisted::NotSoldOut,
        "FULL" => Waitlisted::Full,
        "NOT_FOUND" | "STALE" => Waitlisted::NotCached,
        _ => return Err(bad()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reply_of_the_wait_script_reads_as_its_outcome() {
        assert_eq!(parse_wait_reply("JOINED:3:7").unwrap(), Waitlisted::Joined { position: 3, place: 7 });
        assert_eq!(parse_wait_reply("WAITING:1:2").unwrap(), Waitlisted::Waiting { position: 1, place: 2 });
        assert_eq!(parse_wait_reply("PROMOTED:12").unwrap(), Waitlisted::Promoted { ticket_no: TicketNo::new(12) });
        assert_eq!(
            parse_wait_reply("HOLDS:0199a0b0-0000-7000-8000-000000000001:4").unwrap(),
            Waitlisted::Holds(Holding {
                order: OrderId::parse("0199a0b0-0000-7000-8000-000000000001").unwrap(),
                ticket_no: TicketNo::new(4)
            })
        );
        assert_eq!(parse_wait_reply("STALE").unwrap(), Waitlisted::NotCached);
        for bad in ["", "JOINED", "JOINED:3", "JOINED:x:1", "PROMOTED:x", "HOLDS:x", "MAYBE"] {
            assert!(parse_wait_reply(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn a_field_read_at_home_after_a_handed_number_went_on_is_told_as_the_script_would() {
        let order = "0199a0b0-0000-7000-8000-000000000001";
        let told = |field: &str| parse_wait_reply(&held_reply(field)).unwrap();
        assert_eq!(told(&format!("{order}:4")), Waitlisted::Holds(split_holding(&format!("{order}:4")).unwrap()));
        assert_eq!(told(&format!("!{order}")), Waitlisted::Cancelled);
        // Nothing held after all: busy, and the user asks again.
        for nothing in ["-", "#000000000000001:2", ""] {
            assert_eq!(told(nothing), Waitlisted::NotCached, "{nothing:?}");
        }
    }
}
