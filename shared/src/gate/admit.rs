//! The consumer's question before it stores an order: does the cache count it? (`admit.lua`)

use std::sync::LazyLock;

use super::{Gate, GateError, cache_script, keys};
use crate::domain::OrderMessage;

static ADMIT_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(cache_script!("admit.lua", opening = ARGV[4])));

/// What the cache says of an order about to be stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admitted {
    /// The user holds this order (or cancelled it): store it.
    Counted,
    /// The cache never counted it, but the user held nothing and its number was free: both are
    /// the order's now. Store it.
    Adopted,
    /// The cache never counted it, the user held nothing, and its number went to someone else:
    /// store it `REJECTED` so its user learns. The user's field names it now (as a rebuild names
    /// a rejected order), so their retry is told of it rather than given a second order.
    Taken,
    /// The user holds another order: do not store this one.
    Uncounted,
    /// No cache of this history to ask (lost, before a failover, or expired after the sale): store
    /// it, as before any check; a rebuild waits for the queue to drain and counts it.
    NotCached,
}

impl Gate {
    /// Asks the cache whether it counts `order`, taking it in when it can (one script).
    pub async fn admit(&self, order: &OrderMessage) -> Result<Admitted, GateError> {
        let buckets = self.buckets(&order.event_id).await?;
        // The user's field is at their home; a number free elsewhere (a rare late send after a
        // rebuild) is not looked for there: the order is then stored REJECTED and the number
        // stays on sale, never sold twice.
        let e = buckets.home(&order.user_id);
        let mut conn = self.link.conn().await?;
        let opening = super::opening_arg(&conn);
        let reply: String = ADMIT_SCRIPT
            .key(keys::meta(e))
            .key(keys::seats(e))
            .arg(keys::user_field(&order.user_id))
            .arg(keys::holding(&order.holding()))
            .arg(order.ticket_no.get())
            .arg(opening)
            .invoke_async(&mut conn)
            .await?;
        Ok(match reply.as_str() {
            "COUNTED" => Admitted::Counted,
            "ADOPTED" => Admitted::Adopted,
            "TAKEN" => Admitted::Taken,
            "UNCOUNTED" => Admitted::Uncounted,
            "NOT_FOUND" | "STALE" => Admitted::NotCached,
            _ => return Err(GateError::Protocol(format!("admit reply {reply:?}"))),
        })
    }
}
