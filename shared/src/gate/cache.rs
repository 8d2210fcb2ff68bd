//! Laying down an event's whole cache: warmed at release, rebuilt exactly from DynamoDB after a
//! loss (under a lock, once the loss has settled), and the layout check that rebuilds an older
//! layout's cache at once.

use std::sync::LazyLock;

use redis::AsyncCommands;

use super::{CACHE_AFTER_END, CLOCK_TRUST, Gate, GateError, keys, opening_on, script_time};
use crate::domain::{Event, EventId, Holdings, TicketNo, event::epoch_ms, order::WaitHead, sale_mode::SaleMode};

/// The latest time the scripts' format holds (15 digits of epoch ms): a window opening then never
/// opens.
const NEVER: i64 = 999_999_999_999_999;

static UNLOCK_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(include_str!("unlock.lua")));

/// How many ticket numbers one `RPUSH` carries when an event is warmed.
const WARM_CHUNK: u32 = 10_000;

/// The event's rebuild lock, held (`Gate::lock_rebuild`).
pub struct RebuildLock {
    event: EventId,
    token: String,
}

impl Gate {
    /// Fills the cache for a freshly released event: every ticket number free, no user field. One
    /// `MULTI` so a grab never sees half an event; `meta` goes last because its presence is what
    /// "warmed" means. The outbox is never touched: only the consumer and reconcile remove entries.
    pub async fn warm(&self, event: &Event) -> Result<(), GateError> {
        let buckets = self.buckets.learn(&event.id, event.buckets);
        let mut conn = self.link.conn().await?;
        // Bucket 0 last: its meta is what "warmed" means to a grab that has not read the count.
        for bucket in buckets.iter().rev() {
            let mut pipe = redis::pipe();
            pipe.atomic();
            fill(&mut pipe, event, &buckets, bucket, &Holdings::default(), &opening_on(&mut conn, bucket).await?);
            pipe.query_async::<()>(&mut conn).await?;
        }
        Ok(())
    }

    /// Takes the event's rebuild lock (`SET NX PX`): `None` when another rebuild holds it. Taken
    /// before anything is read from DynamoDB, so a crowd that finds the cache lost makes one
    /// rebuild's reads, not one each.
    pub async fn lock_rebuild(
        &self,
        event: &EventId,
        ttl: std::time::Duration,
    ) -> Result<Option<RebuildLock>, GateError> {
        let token = uuid::Uuid::now_v7().to_string();
        let locked: Option<String> = redis::cmd("SET")
            .arg(keys::rebuild_lock(event))
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(ttl.as_millis() as u64)
            .query_async(&mut self.link.conn().await?)
            .await?;
        Ok(locked.map(|_| RebuildLock { event: event.clone(), token }))
    }

    /// Releases the lock if it is still this rebuild's (it may have expired and been taken).
    pub async fn unlock_rebuild(&self, lock: RebuildLock) -> Result<(), GateError> {
        let _: i64 = UNLOCK_SCRIPT
            .key(keys::rebuild_lock(&lock.event))
            .arg(&lock.token)
            .invoke_async(&mut self.link.conn().await?)
            .await?;
        Ok(())
    }

    /// Rebuilds a lost cache exactly from what DynamoDB holds: holdings from the stored orders, free
    /// numbers = 1..capacity minus the held ones. Under the event's lock, and only while the cache
    /// (any bucket of it) is still missing from this server's history (absent, or written before a
    /// failover), one `MULTI` per bucket: a concurrent rebuild or grab cannot double anything. The
    /// outbox is left as it is. Returns false when the cache is already there.
    pub async fn rebuild(&self, _lock: &RebuildLock, event: &Event, holdings: &Holdings) -> Result<bool, GateError> {
        let e = &event.id;
        let buckets = self.buckets.learn(e, event.buckets);
        let mut conn = self.link.conn().await?;
        let mut openings = Vec::new();
        let mut intact = true;
        for bucket in buckets.iter() {
            let opening = opening_on(&mut conn, bucket).await?;
            intact &= conn.hexists::<_, _, bool>(keys::meta(bucket), &opening).await?;
            openings.push(opening);
        }
        if intact {
            return Ok(false);
        }
        // A sharded event is rebuilt whole, each bucket from DynamoDB: a number may sit free or
        // held in a bucket other than its own, so one bucket alone cannot be told what it lacks.
        // First every bucket stops deciding (each script answers STALE, and its caller waits for
        // this rebuild), then each is laid down again.
        if buckets.is_sharded() {
            for (bucket, opening) in buckets.iter().zip(&openings) {
                conn.hdel::<_, _, ()>(keys::meta(bucket), opening).await?;
            }
        }
        for (bucket, opening) in buckets.iter().zip(&openings).rev() {
            let mut pipe = redis::pipe();
            pipe.atomic();
            fill(&mut pipe, event, &buckets, bucket, holdings, opening);
            pipe.query_async::<()>(&mut conn).await?;
        }
        conn.del::<_, ()>(keys::lost_since(e)).await?;
        Ok(true)
    }

    /// Whether the event's cache is intact in this history but written by an older layout (a deploy
    /// of a new one). Such a cache is rebuilt at once, without the wait a lost cache needs: nothing
    /// of it was lost, and the outbox it keeps holds every order not yet stored.
    pub async fn layout_outdated(&self, event: &EventId) -> Result<bool, GateError> {
        let mut conn = self.link.conn().await?;
        let opening = opening_on(&mut conn, event).await?;
        let history = opening.strip_prefix(&keys::opening_prefix()).unwrap_or_default().to_owned();
        let older = keys::older_openings(&history);
        let found: Vec<Option<String>> =
            redis::cmd("HMGET").arg(keys::meta(event)).arg(&older).query_async(&mut conn).await?;
        Ok(found.iter().any(Option::is_some))
    }

    /// Records when the cache was first seen lost and returns that time (epoch ms). The mark
    /// expires by itself; a rebuild removes it.
    pub async fn mark_lost(&self, event: &EventId, now_ms: i64) -> Result<i64, GateError> {
        let mut conn = self.link.conn().await?;
        let (_, since): ((), Option<i64>) = redis::pipe()
            .cmd("SET")
            .arg(keys::lost_since(event))
            .arg(now_ms)
            .arg("NX")
            .arg("PX")
            .arg(600_000)
            .cmd("GET")
            .arg(keys::lost_since(event))
            .query_async(&mut conn)
            .await?;
        Ok(since.unwrap_or(now_ms))
    }
}

/// The commands that lay down one bucket of an event's cache (inside a `MULTI`; an unsharded
/// event has one, the whole cache): meta with the event's fields and its home users' fields, the
/// free numbers whose bucket it is (`Buckets::shelf_of`) on sale, the promotions the rebuild made
/// for its home users, and at bucket 0 the waitlist and the numbers held for it. The outbox is
/// left as it is otherwise; takes and hands under way are forgotten (their steps answer GONE, and
/// reconcile finds nothing to settle: a give-back runs again from its marker).
fn fill(
    pipe: &mut redis::Pipeline,
    event: &Event,
    buckets: &keys::Buckets,
    bucket: &keys::Bucket,
    holdings: &Holdings,
    opening: &str,
) {
    let b = bucket;
    let here = |n: &TicketNo| buckets.shelf_of(*n) == bucket;
    let homed = |u: &crate::domain::UserId| buckets.home(u) == bucket;
    let laid = [keys::seats(b), keys::meta(b), keys::returned(b), keys::wait(b), keys::waiting(b)];
    let under_way = [keys::taking(b), keys::taken(b), keys::giving(b), keys::handed(b)];
    for key in laid.iter().chain(&under_way) {
        pipe.del(key).ignore();
    }
    let on_sale: Vec<u32> = (1..=event.capacity)
        .map(TicketNo::new)
        .filter(|n| here(n) && !holdings.held.contains(n) && !holdings.returned.contains(n))
        .map(TicketNo::get)
        .collect();
    for chunk in on_sale.chunks(WARM_CHUNK as usize) {
        pipe.rpush(keys::seats(b), chunk).ignore();
    }
    // The waitlist's line, with the numbers held for it, is bucket 0's; each promotion the
    // rebuild made goes to the outbox at its user's home, beside their holding.
    let line = bucket.index() == 0;
    if line {
        let returned: Vec<u32> = holdings.returned.iter().map(|n| n.get()).collect();
        for chunk in returned.chunks(WARM_CHUNK as usize) {
            pipe.rpush(keys::returned(b), chunk).ignore();
        }
    }
    let buyers: Vec<_> = holdings.buyers.iter().filter(|x| homed(&x.user)).collect();
    for chunk in buyers.chunks(WARM_CHUNK as usize) {
        let fields: Vec<(String, String)> =
            chunk.iter().map(|b| (keys::user_field(&b.user), keys::holding(&b.holding()))).collect();
        pipe.hset_multiple(keys::meta(b), &fields).ignore();
    }
    let cancelled: Vec<_> = holdings.cancelled.iter().filter(|c| homed(&c.user)).collect();
    for chunk in cancelled.chunks(WARM_CHUNK as usize) {
        // A number still to be given back stays with its order, so the give-back can run on it.
        let fields: Vec<(String, String)> = chunk
            .iter()
            .map(|c| {
                let value = if c.give_back_pending { keys::holding(&c.holding()) } else { keys::cancelled(&c.order) };
                (keys::user_field(&c.user), value)
            })
            .collect();
        pipe.hset_multiple(keys::meta(b), &fields).ignore();
    }
    for (order, message) in &holdings.promotions {
        let user = crate::domain::OrderMessage::parse(message).map(|m| m.user_id);
        if user.map_or(line, |u| homed(&u)) {
            pipe.hset(keys::outbox(b), order.as_str(), message).ignore();
        }
    }
    if line {
        for chunk in holdings.waiting.chunks(WARM_CHUNK as usize) {
            let places: Vec<(u64, &str)> = chunk.iter().map(|w| (w.place, w.user.as_str())).collect();
            pipe.zadd_multiple(keys::wait(b), &places).ignore();
            let heads: Vec<(&str, String)> = chunk
                .iter()
                .map(|w| (w.user.as_str(), WaitHead::new(&event.id, &w.user, &w.email).as_str().to_owned()))
                .collect();
            pipe.hset_multiple(keys::waiting(b), &heads).ignore();
        }
    }
    let (start, end) = (epoch_ms(event.sale_start), epoch_ms(event.sale_end));
    let trust = CLOCK_TRUST.as_millis() as i64;
    // A ballot's numbers are handed out by its draw only: its grab window never opens (the grab
    // script reads the opening as the latest time it can write, and says NOT_STARTED).
    let (open_from, open_until) = match event.sale_mode {
        SaleMode::Ballot => (script_time(NEVER), script_time(0)),
        SaleMode::FirstCome | SaleMode::FairOpen => (script_time(start + trust), script_time(end - trust)),
    };
    pipe.hset_multiple(
        keys::meta(b),
        &[
            ("capacity", event.capacity.to_string()),
            ("start", start.to_string()),
            ("end", end.to_string()),
            ("state", "open".to_owned()),
            // The span where the grab script lets the caller's clock decide, precomputed so the
            // script compares strings instead of parsing numbers.
            (opening, open_from),
            ("open_until", open_until),
            // The waitlist's rules (wait.lua).
            ("cancel_until", epoch_ms(event.cancel_until).to_string()),
            ("wait_max", event.waitlist_size.to_string()),
            // How many buckets the numbers are split over (`Gate::buckets` reads bucket 0's).
            ("buckets", buckets.count().to_string()),
            // A value longer than `hash-max-listpack-value` (64 bytes) makes Redis keep meta as a
            // hash table from the start: as a listpack, its first 512 user fields would each be
            // found by a linear scan, costing the first grabs of every event more than the rest.
            ("layout", keys::LAYOUT.to_owned()),
        ],
    )
    .ignore();
    let forget_at = epoch_ms(event.active_until()) + CACHE_AFTER_END.as_millis() as i64;
    for key in laid {
        pipe.cmd("PEXPIREAT").arg(key).arg(forget_at).ignore();
    }
}
