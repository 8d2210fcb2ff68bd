//! Giving a cancelled order's number back, in one script (`give_back.lua`): to the waitlist's head
//! as a new order, or back on sale during the sale, or held back for the waitlist after its end.
//! A sharded event's give-back reaches the line at bucket 0 in steps (`handing`).

use std::sync::LazyLock;

use redis::AsyncCommands;

use super::{
    Gate, GateError, Written, cache_script,
    handing::{Hand, HandedOn},
    keys,
    link::LinkConn,
    opening_arg,
};
use domain::{EventId, Holding, OrderId, OrderMessage, TicketNo, UserId, order::WaitHead};

static GIVE_BACK_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(cache_script!("give_back.lua", opening = ARGV[6], lasting)));

/// What giving a number back did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GaveBack {
    /// The head of the waitlist holds it now: a new order, in the outbox, to be sent.
    Promoted { user: UserId, order_id: OrderId, message: String },
    /// Nobody waited, during the sale: the number is on sale again.
    Freed,
    /// Nobody waited, after the sale's end: the number is held for the next user who joins the
    /// waitlist (until `cancel_until`; unsold after that).
    HeldBack,
    /// Given back before (this is a retry): nothing done.
    Gone,
    /// The event's cache is missing, or predates a failover: rebuild it, then give back again.
    NotCached,
    /// The waitlist's line and its heads disagree (a key of the line lost): nothing given; repair
    /// the cache, then give back again.
    LineLost,
}

/// A given-back number, as the script takes it.
pub struct GiveBack<'a> {
    pub event: &'a EventId,
    pub user: &'a UserId,
    pub order_id: &'a OrderId,
    pub ticket_no: TicketNo,
    /// When the order was cancelled (epoch ms): at or after the sale's end, a number nobody waits
    /// for is held for the waitlist instead of going back on sale.
    pub cancelled_ms: i64,
    /// The order id and creation time a promotion gets.
    pub promotion: &'a OrderId,
    pub now: &'a str,
}

impl Gate {
    /// Gives a cancelled order's number back: the waitlist's head gets it as a new order (in the
    /// outbox, like a grab's), or it is free again. Idempotent: the user's field must still hold
    /// exactly this order.
    pub async fn give_back(&self, g: &GiveBack<'_>) -> Result<(GaveBack, Written), GateError> {
        let buckets = self.buckets(g.event).await?;
        if buckets.is_sharded() {
            return self.give_back_to_the_line(g, &buckets).await;
        }
        let e = buckets.home(g.user);
        let mut conn = self.link.conn().await?;
        let opening = opening_arg(&conn);
        let reply: String = GIVE_BACK_SCRIPT
            .key(keys::meta(e))
            .key(keys::seats(e))
            .key(keys::outbox(e))
            .key(keys::wait(e))
            .key(keys::waiting(e))
            .key(keys::returned(e))
            .arg(keys::user_field(g.user))
            .arg(keys::holding(&Holding { order: g.order_id.clone(), ticket_no: g.ticket_no }))
            .arg(g.ticket_no.get())
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
                "RETURNED" => GaveBack::HeldBack,
                "GONE" => GaveBack::Gone,
                "NOT_FOUND" | "STALE" => GaveBack::NotCached,
                "LOST" => GaveBack::LineLost,
                _ => return Err(GateError::Protocol(format!("give-back reply {reply:?}"))),
            },
        };
        Ok((gave, Written { conn, key: keys::meta(e) }))
    }

    /// A sharded event's give-back (`handing`): the canceller lets go at their home, then bucket
    /// 0's line hands the number on. Idempotent like the one-script give-back.
    async fn give_back_to_the_line(
        &self,
        g: &GiveBack<'_>,
        buckets: &keys::Buckets,
    ) -> Result<(GaveBack, Written), GateError> {
        let home = buckets.home(g.user);
        let mut conn = self.link.conn().await?;
        let written = |conn: &LinkConn, at: &keys::Bucket| Written { conn: conn.clone(), key: keys::meta(at) };
        let holding = Holding { order: g.order_id.clone(), ticket_no: g.ticket_no };
        let generation = match self.let_go(&mut conn, home, g.user, &holding).await? {
            None => return Ok((GaveBack::NotCached, written(&conn, home))),
            Some(None) => return Ok((GaveBack::Gone, written(&conn, home))),
            Some(Some(generation)) => generation,
        };
        let hand = Hand {
            id: g.order_id.as_str(),
            ticket_no: g.ticket_no,
            promotion: g.promotion,
            now: g.now,
            returned_ms: g.cancelled_ms,
            generation: &generation,
        };
        let (gave, at) = match self.hand_on(&mut conn, buckets, &hand, None).await? {
            HandedOn::Promoted { message, promoted } => {
                let at = buckets.home(&promoted.user_id);
                (GaveBack::Promoted { user: promoted.user_id, order_id: promoted.order_id, message }, at)
            }
            HandedOn::Before => (GaveBack::Gone, home),
            HandedOn::Freed => (GaveBack::Freed, home),
            HandedOn::Returned => (GaveBack::HeldBack, home),
            HandedOn::NotCached => return Ok((GaveBack::NotCached, written(&conn, home))),
            HandedOn::LineLost => return Ok((GaveBack::LineLost, written(&conn, home))),
        };
        // Done: asked again, the canceller's home answers GONE at once.
        let _: u32 = conn.hdel(keys::giving(home), g.order_id.as_str()).await?;
        Ok((gave, written(&conn, at)))
    }
}
