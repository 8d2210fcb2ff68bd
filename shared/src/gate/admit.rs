//! The consumer's question before it stores an order: does the cache count it? (`admit.lua`)

use std::sync::LazyLock;

use super::{Gate, GateError, cache_script, keys};
use crate::domain::OrderMessage;

static ADMIT_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(cache_script!("admit.lua", opening = ARGV[4])));
static CLAIM_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(cache_script!("claim.lua", opening = ARGV[4], lasting)));

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
    /// Asks the cache whether it counts `order`, taking it in when it can: one script, or on a
    /// sharded event, when the number is not free at the user's home, a claim of it where it may
    /// be free (its own bucket, and bucket 0 where the line frees numbers) and the script again.
    pub async fn admit(&self, order: &OrderMessage) -> Result<Admitted, GateError> {
        let buckets = self.buckets(&order.event_id).await?;
        let home = buckets.home(&order.user_id);
        let mut conn = self.link.conn().await?;
        if !buckets.is_sharded() {
            return decided(self.admit_at(&mut conn, home, order, "").await?);
        }
        if let Some(admitted) = self.admit_at(&mut conn, home, order, "look").await? {
            return Ok(admitted);
        }
        let mut elsewhere = vec![buckets.shelf_of(order.ticket_no), buckets.get(0).expect("bucket 0")];
        elsewhere.dedup();
        for bucket in elsewhere.into_iter().filter(|b| *b != home) {
            let reply: String = CLAIM_SCRIPT
                .key(keys::meta(bucket))
                .key(keys::seats(bucket))
                .key(keys::taken(bucket))
                .arg(order.order_id.as_str())
                .arg(order.ticket_no.get())
                .arg(order.user_id.as_str())
                .arg(super::opening_arg(&conn))
                .invoke_async(&mut conn)
                .await?;
            match reply.as_str() {
                "CLAIMED" => {}
                "NONE" => continue,
                "NOT_FOUND" | "STALE" => return Ok(Admitted::NotCached),
                _ => return Err(GateError::Protocol(format!("claim reply {reply:?}"))),
            }
            let admitted = decided(self.admit_at(&mut conn, home, order, "claimed").await?)?;
            if admitted == Admitted::Uncounted {
                // The user came to hold another order meanwhile: the number goes back where it was.
                let record = format!("{}:{}", order.ticket_no, order.user_id);
                let _: u32 =
                    super::buckets::return_take(&mut conn, bucket, &order.order_id, &record, order.ticket_no.get())
                        .await?;
            }
            return Ok(admitted);
        }
        decided(self.admit_at(&mut conn, home, order, "").await?)
    }

    /// `admit.lua` at the user's home, at `step`; `None` for ELSEWHERE (the number not free there).
    async fn admit_at(
        &self,
        conn: &mut super::link::LinkConn,
        home: &keys::Bucket,
        order: &OrderMessage,
        step: &str,
    ) -> Result<Option<Admitted>, GateError> {
        let opening = super::opening_arg(conn);
        let reply: String = ADMIT_SCRIPT
            .key(keys::meta(home))
            .key(keys::seats(home))
            .arg(keys::user_field(&order.user_id))
            .arg(keys::holding(&order.holding()))
            .arg(order.ticket_no.get())
            .arg(opening)
            .arg(step)
            .invoke_async(conn)
            .await?;
        Ok(Some(match reply.as_str() {
            "COUNTED" => Admitted::Counted,
            "ADOPTED" => Admitted::Adopted,
            "TAKEN" => Admitted::Taken,
            "UNCOUNTED" => Admitted::Uncounted,
            "ELSEWHERE" => return Ok(None),
            "NOT_FOUND" | "STALE" => Admitted::NotCached,
            _ => return Err(GateError::Protocol(format!("admit reply {reply:?}"))),
        }))
    }
}

/// An answer of a step that decides (only "look" answers ELSEWHERE).
fn decided(admitted: Option<Admitted>) -> Result<Admitted, GateError> {
    admitted.ok_or_else(|| GateError::Protocol("admit answered ELSEWHERE to a step that decides".into()))
}
