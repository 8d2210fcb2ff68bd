//! A ballot's draw laid down in the cache (`draw.lua`): its winners' orders in the outbox, the
//! others on the waitlist in draw order. Chunked, each chunk one atomic script.

use std::sync::LazyLock;

use super::{Gate, GateError, Written, cache_script, keys, opening_arg, split_holding};
use domain::{EventId, Holding, OrderId, UserId, order::MessageHead, order::WaitHead};

static DRAW_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(cache_script!("draw.lua", opening = ARGV[1])));

/// A winner, as the script grants them an order.
pub struct DrawWinner<'a> {
    pub user: &'a UserId,
    pub order_id: &'a OrderId,
    pub head: &'a MessageHead,
}

/// An entrant who waits, at this place (their draw position less the capacity).
pub struct DrawWaiter<'a> {
    pub user: &'a UserId,
    pub place: u64,
    pub head: &'a WaitHead,
}

/// What one chunk did.
pub enum DrawLaid {
    /// The orders granted now (a winner who held one already is not among them), and where they
    /// were written.
    Laid { granted: Vec<Holding>, written: Written },
    /// The cache is missing or predates a failover: rebuild it, then lay the chunk again.
    NotCached,
}

impl Gate {
    pub async fn lay_draw(
        &self,
        event: &EventId,
        winners: &[DrawWinner<'_>],
        waiters: &[DrawWaiter<'_>],
    ) -> Result<DrawLaid, GateError> {
        let mut conn = self.link.conn().await?;
        let mut call = DRAW_SCRIPT.key(keys::meta(event));
        call.key(keys::seats(event)).key(keys::outbox(event)).key(keys::wait(event)).key(keys::waiting(event));
        call.arg(opening_arg(&conn)).arg(winners.len());
        for w in winners {
            call.arg(keys::user_field(w.user)).arg(w.order_id.as_str()).arg(w.head.as_str());
        }
        for w in waiters {
            call.arg(w.user.as_str()).arg(w.place).arg(w.head.as_str());
        }
        let reply: Vec<String> = call.invoke_async(&mut conn).await?;
        if matches!(reply.first().map(String::as_str), Some("NOT_FOUND" | "STALE")) {
            return Ok(DrawLaid::NotCached);
        }
        let granted = reply
            .iter()
            .map(|r| match r.as_str() {
                "SOLD_OUT" => Err(GateError::Protocol("a draw's winner found no free number".into())),
                held => split_holding(held),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(DrawLaid::Laid { granted, written: Written { conn, key: keys::meta(event) } })
    }
}
