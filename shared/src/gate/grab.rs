//! The grab: one script decides it (`grab.lua`), and the outcome it reads back.

use std::sync::LazyLock;

use super::{Gate, GateError, Written, cache_script, keys, moves::Moved, opening_arg, script_time, split_holding};
use crate::{
    config::GrabPolicy,
    domain::{EventId, Holding, OrderId, UserId, order::MessageHead},
};

/// The grab script as Redis runs it: the preamble and `grab.lua` (gate-bench and the script's own
/// tests load this very text).
pub const GRAB_SOURCE: &str = cache_script!("grab.lua", opening = ARGV[7]);

/// How many times a sharded grab whose home ran dry moves numbers home and asks again before it
/// answers busy: each move brings at least one number, which a crowd at the same home may take
/// first.
const SHARDED_ROUNDS: usize = 8;

/// The grab script, loaded once per execution environment and run with `EVALSHA`; the redis
/// crate loads it again by itself when a server answers `NOSCRIPT` (after a restart or failover).
static GRAB_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(GRAB_SOURCE));

/// What the grab script decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrabOutcome {
    RateLimited {
        retry_after_ms: u64,
    },
    NotFound,
    /// The event is cached, but by a primary whose last writes this server may lack (a failover):
    /// nothing is decided until the cache is rebuilt.
    Stale,
    NotStarted,
    Ended,
    /// The user holds this order already: a retry gets it back.
    Already(Holding),
    /// The user cancelled this order: one ticket per user, even a given-back one.
    Cancelled(OrderId),
    SoldOut,
    /// A new order, and its message as the outbox holds it (the head completed with the number).
    Granted {
        holding: Holding,
        message: String,
    },
}

impl GrabOutcome {
    /// The script's own name for the outcome (also the metric and log name).
    pub fn code(&self) -> &'static str {
        match self {
            Self::RateLimited { .. } => "RATE_LIMITED",
            Self::NotFound => "NOT_FOUND",
            Self::Stale => "STALE",
            Self::NotStarted => "NOT_STARTED",
            Self::Ended => "ENDED",
            Self::Already(_) => "ALREADY",
            Self::Cancelled(_) => "CANCELLED",
            Self::SoldOut => "SOLD_OUT",
            Self::Granted { .. } => "OK",
        }
    }
}

/// A grab as the script sees it.
pub struct GrabAttempt<'a> {
    pub event: &'a EventId,
    pub user: &'a UserId,
    pub order_id: &'a OrderId,
    /// The order message the script completes with the ticket number.
    pub head: &'a MessageHead,
    /// The caller's clock (epoch ms): it decides the sale window unless a boundary is within
    /// [`super::CLOCK_TRUST`], where the script asks Redis's `TIME` instead.
    pub clock_ms: i64,
}

impl GrabAttempt<'_> {
    /// The grab script's ARGV, in the order its header gives (gate-bench calls the script with
    /// them too).
    /// `opening` is [`keys::opening`] of the connection's history, or in cluster mode
    /// [`keys::opening_prefix`] (the script asks its node).
    pub fn script_args(&self, policy: GrabPolicy, opening: &str) -> [String; 7] {
        [
            keys::user_field(self.user),
            self.order_id.to_string(),
            self.head.as_str().to_owned(),
            policy.rate_limit.to_string(),
            script_time(self.clock_ms + policy.rate_window.as_millis() as i64),
            script_time(self.clock_ms),
            opening.to_owned(),
        ]
    }
}

/// A grab the script decided, and the connection that wrote it.
pub struct Grabbed {
    pub outcome: GrabOutcome,
    pub written: Written,
}

impl Gate {
    pub async fn grab(&self, attempt: &GrabAttempt<'_>, policy: GrabPolicy) -> Result<Grabbed, GateError> {
        let buckets = self.buckets(attempt.event).await?;
        if !buckets.is_sharded() {
            let (reply, written) = self.grab_at(attempt, policy, attempt.event, false).await?;
            let outcome = parse_grab_reply(&reply, attempt, policy)?;
            return Ok(Grabbed { outcome, written });
        }
        self.grab_sharded(attempt, policy, &buckets).await
    }

    /// One run of grab.lua on the bucket `at`; `dry`: answer DRY when it has no number left.
    async fn grab_at(
        &self,
        attempt: &GrabAttempt<'_>,
        policy: GrabPolicy,
        at: &impl keys::HashTag,
        dry: bool,
    ) -> Result<(String, Written), GateError> {
        let mut conn = self.link.conn().await?;
        let mut call = GRAB_SCRIPT.key(keys::meta(at));
        call.key(keys::seats(at)).key(keys::outbox(at));
        let opening = opening_arg(&conn);
        for arg in attempt.script_args(policy, &opening) {
            call.arg(arg);
        }
        if dry {
            call.arg("dry");
        }
        let reply: String = call.invoke_async(&mut conn).await?;
        Ok((reply, Written { conn, key: keys::meta(at) }))
    }

    /// A grab of a sharded event: grab.lua at the user's home, which alone decides (one ticket per
    /// user, the rate window, the sale's window); when home has no number left, numbers move home
    /// from a sibling (`buckets::refill`, the siblings asked in an order drawn from the order id)
    /// and home decides again. Every sibling empty: `SOLD_OUT`, written as a refusal.
    async fn grab_sharded(
        &self,
        attempt: &GrabAttempt<'_>,
        policy: GrabPolicy,
        buckets: &keys::Buckets,
    ) -> Result<Grabbed, GateError> {
        let home = buckets.home(attempt.user);
        let siblings = super::buckets::siblings(buckets, home.index(), attempt.order_id);
        for _ in 0..SHARDED_ROUNDS {
            let (reply, written) = self.grab_at(attempt, policy, home, true).await?;
            if reply != "DRY" {
                return Ok(Grabbed { outcome: parse_grab_reply(&reply, attempt, policy)?, written });
            }
            let mut conn = written.conn.clone();
            let mut arrived = false;
            for &k in &siblings {
                let sibling = buckets.get(k).ok_or_else(|| GateError::Protocol(format!("no bucket {k}")))?;
                match self.refill(&mut conn, buckets, home, sibling).await? {
                    Moved::Arrived(_) => {
                        arrived = true;
                        break;
                    }
                    Moved::Empty => {}
                    // A bucket lost or laid down again: the event is rebuilt first.
                    Moved::NotCached => return Ok(Grabbed { outcome: GrabOutcome::Stale, written }),
                }
            }
            if !arrived {
                // No sibling had a number free. Numbers on their way between buckets are not sold
                // out: the moves under way (a stopped driver's too) are finished, and home asked
                // again.
                if self.finish_moves(&mut conn, buckets, i64::MAX).await? > 0 {
                    continue;
                }
                // Every bucket empty: home decides once more, writing the refusal (or granting a
                // number that reached it meanwhile).
                let (reply, written) = self.grab_at(attempt, policy, home, false).await?;
                return Ok(Grabbed { outcome: parse_grab_reply(&reply, attempt, policy)?, written });
            }
        }
        // Numbers kept arriving and going to others first: not sold out, not decided either.
        Err(GateError::Contended)
    }
}

/// Reads the script's one-string reply (`OK:<n>`, `ALREADY:<order>:<n>`, `RATE_LIMITED:<ms>`, ...).
fn parse_grab_reply(reply: &str, attempt: &GrabAttempt<'_>, policy: GrabPolicy) -> Result<GrabOutcome, GateError> {
    let bad = || GateError::Protocol(format!("grab reply {reply:?}"));
    let (code, rest) = reply.split_once(':').unwrap_or((reply, ""));
    Ok(match code {
        "OK" => {
            let ticket_no = rest.parse().map_err(|_| bad())?;
            GrabOutcome::Granted {
                holding: Holding { order: attempt.order_id.clone(), ticket_no },
                message: attempt.head.complete(ticket_no),
            }
        }
        "ALREADY" => GrabOutcome::Already(split_holding(rest)?),
        // Callers' clocks differ slightly: the wait is never more than one window.
        "RATE_LIMITED" => GrabOutcome::RateLimited {
            retry_after_ms: rest.parse::<i64>().map_err(|_| bad())?.clamp(1, policy.rate_window.as_millis() as i64)
                as u64,
        },
        "CANCELLED" => GrabOutcome::Cancelled(OrderId::parse(rest).map_err(|_| bad())?),
        "NOT_FOUND" => GrabOutcome::NotFound,
        "STALE" => GrabOutcome::Stale,
        "NOT_STARTED" => GrabOutcome::NotStarted,
        "ENDED" => GrabOutcome::Ended,
        "SOLD_OUT" => GrabOutcome::SoldOut,
        _ => return Err(bad()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{config::GrabPolicy, domain::TicketNo};

    #[test]
    fn every_reply_of_the_script_reads_as_its_outcome() {
        let p = GrabPolicy::default();
        let (event, user) = (EventId::parse("lecture-1").unwrap(), UserId::parse("u1").unwrap());
        let email = crate::domain::Email::parse("u1@example.com").unwrap();
        let order = OrderId::parse("0199a0b0-0000-7000-8000-000000000001").unwrap();
        let other = OrderId::parse("0199a0b0-0000-7000-8000-000000000002").unwrap();
        let head = MessageHead::new(&order, &event, &user, &email, "2026-11-25T12:00:00Z");
        let attempt = GrabAttempt { event: &event, user: &user, order_id: &order, head: &head, clock_ms: 0 };
        let read = |reply: &str| parse_grab_reply(reply, &attempt, p);
        // A granted grab comes back whole: the order and the very message the outbox holds.
        assert_eq!(
            read("OK:17").unwrap(),
            GrabOutcome::Granted {
                holding: Holding { order: order.clone(), ticket_no: TicketNo::new(17) },
                message: head.complete(TicketNo::new(17))
            }
        );
        assert_eq!(
            read(&format!("ALREADY:{other}:3")).unwrap(),
            GrabOutcome::Already(Holding { order: other.clone(), ticket_no: TicketNo::new(3) })
        );
        assert_eq!(read("RATE_LIMITED:250").unwrap(), GrabOutcome::RateLimited { retry_after_ms: 250 });
        assert_eq!(read("RATE_LIMITED:-5").unwrap(), GrabOutcome::RateLimited { retry_after_ms: 1 });
        for code in ["NOT_FOUND", "STALE", "NOT_STARTED", "ENDED", "SOLD_OUT"] {
            assert_eq!(read(code).unwrap().code(), code);
        }
        assert_eq!(read(&format!("CANCELLED:{other}")).unwrap(), GrabOutcome::Cancelled(other.clone()));
        for bad in
            ["", "OK", "OK:x", "ALREADY:abc", "ALREADY:abc:3", "MAYBE", "RATE_LIMITED:", "CANCELLED", "CANCELLED:x"]
        {
            assert!(read(bad).is_err(), "{bad:?} accepted");
        }
    }
}
