//! After the grab: a cancelled order's number given back (to the waitlist's head, or on sale
//! again) and the waitlist itself. Two scripts beside the grab script, on the same keys.

use std::sync::LazyLock;

use super::{Gate, GateError, Written, keys};
use crate::domain::{EventId, OrderId, OrderMessage, UserId, order::WaitHead};

static GIVE_BACK_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(include_str!("give_back.lua")));
static WAIT_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(include_str!("wait.lua")));

/// What giving a number back did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GaveBack {
    /// The head of the waitlist holds it now: a new order, in the outbox, to be sent.
    Promoted { user: UserId, order_id: OrderId, message: String },
    /// Nobody waited, during the sale: the number is on sale again.
    Freed,
    /// Nobody waited, after the sale's end: the number is held for the next user who joins the
    /// waitlist (until `cancel_until`; unsold after that).
    Returned,
    /// Given back before (this is a retry): nothing done.
    Gone,
    /// The event's cache is missing, or predates a failover: rebuild it, then give back again.
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
        ticket_no: u32,
    },
    /// The user holds an order (a grab, or a promotion): nothing to wait for.
    Holds {
        order_id: String,
        ticket_no: u32,
    },
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
    Holds { order_id: String, ticket_no: u32 },
    NotWaiting,
}

/// A given-back number, as the script takes it.
pub struct GiveBack<'a> {
    pub event: &'a EventId,
    pub user: &'a UserId,
    pub order_id: &'a OrderId,
    pub ticket_no: u32,
    /// When the order was cancelled (epoch ms): at or after the sale's end, a number nobody waits
    /// for is held for the waitlist instead of going back on sale.
    pub cancelled_ms: i64,
    /// The order id and creation time a promotion gets.
    pub promotion: &'a OrderId,
    pub now: &'a str,
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
    /// Gives a cancelled order's number back: the waitlist's head gets it as a new order (in the
    /// outbox, like a grab's), or it is free again. Idempotent: the user's field must still hold
    /// exactly this order.
    pub async fn give_back(&self, g: &GiveBack<'_>) -> Result<(GaveBack, Written), GateError> {
        let e = g.event;
        let mut conn = self.link.conn().await?;
        let opening = super::opening_arg(&conn);
        let reply: String = GIVE_BACK_SCRIPT
            .key(keys::meta(e))
            .key(keys::seats(e))
            .key(keys::outbox(e))
            .key(keys::wait(e))
            .key(keys::waiting(e))
            .key(keys::returned(e))
            .arg(keys::user_field(g.user))
            .arg(format!("{}:{}", g.order_id, g.ticket_no))
            .arg(g.ticket_no)
            .arg(g.promotion.as_str())
            .arg(WaitHead::tail(g.promotion, g.now))
            .arg(opening)
            .arg(g.cancelled_ms)
            .invoke_async(&mut conn)
            .await?;
        let gave = match reply.split_once(':') {
            Some(("PROMOTED", message)) => {
                let user = OrderMessage::parse(message)
                    .map_err(|e| GateError::Protocol(format!("promotion message: {e}")))?
                    .user_id;
                GaveBack::Promoted { user, order_id: g.promotion.clone(), message: message.to_owned() }
            }
            _ => match reply.as_str() {
                "FREED" => GaveBack::Freed,
                "RETURNED" => GaveBack::Returned,
                "GONE" => GaveBack::Gone,
                "NOT_FOUND" | "STALE" => GaveBack::NotCached,
                _ => return Err(GateError::Protocol(format!("give-back reply {reply:?}"))),
            },
        };
        Ok((gave, Written { conn, key: keys::meta(e) }))
    }

    /// Puts a user on the waitlist (once; in arrival order; within its size), or after the sale's
    /// end hands them a returned number nobody waited for.
    pub async fn join_waitlist(&self, j: &Join<'_>) -> Result<(Waitlisted, Written), GateError> {
        let event = j.event;
        let mut conn = self.link.conn().await?;
        let opening = super::opening_arg(&conn);
        let reply: String = WAIT_SCRIPT
            .key(keys::meta(event))
            .key(keys::seats(event))
            .key(keys::wait(event))
            .key(keys::waiting(event))
            .key(keys::returned(event))
            .key(keys::outbox(event))
            .arg(keys::user_field(j.user))
            .arg(j.user.as_str())
            .arg(j.head.as_str())
            .arg(j.clock_ms)
            .arg(opening)
            .arg(j.promotion.as_str())
            .arg(WaitHead::tail(j.promotion, j.now))
            .invoke_async(&mut conn)
            .await?;
        Ok((parse_wait_reply(&reply)?, Written { conn, key: keys::meta(event) }))
    }

    /// The user's place on the waitlist, or the order a promotion gave them.
    pub async fn waitlist_place(&self, event: &EventId, user: &UserId) -> Result<WaitlistPlace, GateError> {
        let mut conn = self.link.conn().await?;
        // One slot, one round trip; read together so a promotion between them cannot hide the user.
        let (rank, waiting, held): (Option<u64>, u64, Option<String>) = redis::pipe()
            .atomic()
            .zrank(keys::wait(event), user.as_str())
            .zcard(keys::wait(event))
            .hget(keys::meta(event), keys::user_field(user))
            .query_async(&mut conn)
            .await?;
        if let Some(rank) = rank {
            return Ok(WaitlistPlace::Waiting { position: rank + 1, waiting });
        }
        Ok(match held {
            Some(h) if !h.starts_with(['#', '!']) => {
                let (order_id, ticket_no) = super::split_holding(&h)?;
                WaitlistPlace::Holds { order_id, ticket_no }
            }
            _ => WaitlistPlace::NotWaiting,
        })
    }

    /// How many wait (tests and the organiser's report).
    pub async fn waitlist_len(&self, event: &EventId) -> Result<u64, GateError> {
        Ok(redis::AsyncCommands::zcard(&mut self.link.conn().await?, keys::wait(event)).await?)
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
        "HOLDS" => {
            let (order_id, ticket_no) = super::split_holding(rest)?;
            Waitlisted::Holds { order_id, ticket_no }
        }
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
        assert_eq!(parse_wait_reply("PROMOTED:12").unwrap(), Waitlisted::Promoted { ticket_no: 12 });
        assert_eq!(
            parse_wait_reply("HOLDS:0199a0b0-0000-7000-8000-000000000001:4").unwrap(),
            Waitlisted::Holds { order_id: "0199a0b0-0000-7000-8000-000000000001".into(), ticket_no: 4 }
        );
        assert_eq!(parse_wait_reply("STALE").unwrap(), Waitlisted::NotCached);
        for bad in ["", "JOINED", "JOINED:3", "JOINED:x:1", "PROMOTED:x", "HOLDS:x", "MAYBE"] {
            assert!(parse_wait_reply(bad).is_err(), "{bad:?} accepted");
        }
    }
}
