//! The outbox: order id -> order message, from the script that decided the order until DynamoDB
//! holds it. Only the consumer and reconcile remove entries.

use redis::AsyncCommands;

use super::{Gate, GateError, keys};
use domain::{EventId, Holding, OrderId, UserId};

/// The consumer's removal of an entry: only while its bucket is not stopped by a rebuild.
static LET_OUT_SCRIPT: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(super::cache_script!("let_out.lua", opening = ARGV[1])));

/// A holder's order as their home bucket has it now ([`Gate::holding_now`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeldNow {
    /// Held, and its message still in the outbox: not stored yet, and perhaps never sent (its
    /// first grab was told 503).
    InOutbox(String),
    /// Held, its entry gone: the consumer removes one only once DynamoDB holds the order.
    Stored,
    /// The user's field holds it no more: gone with a lost bucket (the rebuild did not know it),
    /// or cancelled since.
    NotHeld,
}

/// An order waiting in the outbox for DynamoDB to hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxEntry {
    pub order_id: OrderId,
    /// The order message, exactly as the SQS body carries it.
    pub message: String,
}

impl Gate {
    /// Orders in the outbox, over every bucket of the event.
    pub async fn outbox_len(&self, event: &EventId) -> Result<u64, GateError> {
        let mut conn = self.link.conn().await?;
        let mut len = 0;
        for b in self.buckets(event).await?.iter() {
            len += conn.hlen::<_, u64>(keys::outbox(b)).await?;
        }
        Ok(len)
    }

    /// Says the consumer of `queue` stored an order at `at_ms` ([`keys::consumer_stored`]).
    pub async fn note_stored(&self, queue: &str, at_ms: i64) -> Result<(), GateError> {
        let mut conn = self.link.conn().await?;
        let _: () = conn.pset_ex(keys::consumer_stored(queue), at_ms, 86_400_000).await?;
        Ok(())
    }

    /// When the consumer of `queue` last stored an order of any sale (unix ms), if it did in a day.
    pub async fn consumer_stored(&self, queue: &str) -> Result<Option<i64>, GateError> {
        let mut conn = self.link.conn().await?;
        Ok(conn.get(keys::consumer_stored(queue)).await?)
    }

    /// When the oldest order in the outbox was decided (unix ms, from its UUIDv7 id), over every
    /// bucket: the organiser's "oldest order not yet stored". Reads the ids only (`HKEYS`).
    pub async fn oldest_in_outbox(&self, event: &EventId) -> Result<Option<i64>, GateError> {
        let mut conn = self.link.conn().await?;
        let mut oldest: Option<i64> = None;
        for b in self.buckets(event).await?.iter() {
            let ids: Vec<String> = conn.hkeys(keys::outbox(b)).await?;
            for ms in ids.iter().filter_map(|id| OrderId::parse(id).ok()?.created_ms()) {
                oldest = Some(oldest.map_or(ms, |o| o.min(ms)));
            }
        }
        Ok(oldest)
    }

    /// Every outbox entry (tests and tools; the outbox is small outside a sale's first seconds).
    pub async fn outbox(&self, event: &EventId) -> Result<Vec<OutboxEntry>, GateError> {
        self.outbox_of(&self.buckets(event).await?).await
    }

    /// Every outbox entry of these buckets (a rebuild names them: bucket 0, which holds their
    /// count, may be the one lost).
    pub async fn outbox_of(&self, buckets: &keys::Buckets) -> Result<Vec<OutboxEntry>, GateError> {
        let mut conn = self.link.conn().await?;
        let mut entries = Vec::new();
        for b in buckets.iter() {
            let all: Vec<(String, String)> = conn.hgetall(keys::outbox(b)).await?;
            entries.extend(all.into_iter().filter_map(|(key, message)| entry(key, message)));
        }
        Ok(entries)
    }

    /// The message of `user`'s order in the outbox (at their home bucket), if it is there.
    pub async fn outbox_entry(
        &self,
        event: &EventId,
        user: &UserId,
        order_id: &OrderId,
    ) -> Result<Option<String>, GateError> {
        let buckets = self.buckets(event).await?;
        Ok(self.link.conn().await?.hget(keys::outbox(buckets.home(user)), order_id.as_str()).await?)
    }

    /// What a holder's retry finds at their home bucket now, field and outbox read in one step:
    /// an answer naming `held` may have been read before the bucket was lost, and the rebuild
    /// since may not know the order (it was only in the lost outbox).
    pub async fn holding_now(&self, event: &EventId, user: &UserId, held: &Holding) -> Result<HeldNow, GateError> {
        let buckets = self.buckets(event).await?;
        let home = buckets.home(user);
        let (field, message): (Option<String>, Option<String>) = redis::pipe()
            .atomic()
            .hget(keys::meta(home), keys::user_field(user))
            .hget(keys::outbox(home), held.order.as_str())
            .query_async(&mut self.link.conn().await?)
            .await?;
        let holds = field.as_deref().and_then(keys::parse_holding).is_some_and(|now| now.order == held.order);
        Ok(match (holds, message) {
            (false, _) => HeldNow::NotHeld,
            (true, Some(message)) => HeldNow::InOutbox(message),
            (true, None) => HeldNow::Stored,
        })
    }

    /// Removes an order's outbox entry once DynamoDB holds the order: from its user's home bucket
    /// (the only one that can hold it), or, for an entry whose user cannot be read, from every one;
    /// the outbox's only while not stopped by a rebuild (`let_out.lua`: the rebuild reads what is
    /// left there, and reconcile removes it once the rebuild is done); then its sent record's entry
    /// is marked stored (reconcile removes it a while later).
    pub async fn remove_from_outbox(
        &self,
        event: &EventId,
        user: Option<&UserId>,
        order_id: &OrderId,
    ) -> Result<(), GateError> {
        let buckets = self.buckets(event).await?;
        let mut conn = self.link.conn().await?;
        for b in buckets.iter().filter(|b| user.is_none_or(|u| buckets.home(u) == *b)) {
            let _: i64 = LET_OUT_SCRIPT
                .key(keys::meta(b))
                .key(keys::outbox(b))
                .arg(super::opening_arg(&conn))
                .arg(order_id.as_str())
                .invoke_async(&mut conn)
                .await?;
        }
        self.mark_sent_stored(&mut conn, &buckets, user, order_id).await
    }

    /// Outbox entries older than `age` on the server's clock (age from the UUIDv7 order id), at
    /// most `limit`. An entry whose id tells no age is due at once, so reconcile looks at it; one
    /// whose key is no order id at all (only the scripts write here, with ids they were given) is
    /// removed and logged: no consumer could store it.
    pub async fn outbox_due(
        &self,
        event: &EventId,
        age: std::time::Duration,
        limit: usize,
    ) -> Result<Vec<OutboxEntry>, GateError> {
        let mut conn = self.link.conn().await?;
        let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(&mut conn).await?;
        let cutoff = secs * 1000 + micros / 1000 - age.as_millis() as i64;
        let mut due = Vec::new();
        for b in self.buckets(event).await?.iter() {
            let mut cursor = 0u64;
            loop {
                let (next, page): (u64, Vec<(String, String)>) = redis::cmd("HSCAN")
                    .arg(keys::outbox(b))
                    .arg(cursor)
                    .arg("COUNT")
                    .arg(500)
                    .query_async(&mut conn)
                    .await?;
                for (key, message) in page {
                    let Ok(order_id) = OrderId::parse(&key) else {
                        tracing::error!(event_id = %event, "outbox entry under a key that is no order id removed");
                        let _: u32 = conn.hdel(keys::outbox(b), &key).await?;
                        continue;
                    };
                    if order_id.created_ms().is_none_or(|ms| ms <= cutoff) {
                        due.push(OutboxEntry { order_id, message });
                    }
                }
                cursor = next;
                if due.len() >= limit {
                    due.truncate(limit);
                    return Ok(due);
                }
                if cursor == 0 {
                    break;
                }
            }
        }
        Ok(due)
    }
}

fn entry(key: String, message: String) -> Option<OutboxEntry> {
    Some(OutboxEntry { order_id: OrderId::parse(&key).ok()?, message })
}
