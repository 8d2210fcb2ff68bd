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
        let mut pipe = redis::pipe();
        pipe.atomic();
        let mut conn = self.link.conn().await?;
        fill(&mut pipe, event, &Holdings::default(), &opening_on(&mut conn, &event.id).await?);
        pipe.query_async::<()>(&mut conn).await?;
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
    /// is still missing from this server's history (absent, or written before a failover), in one
    /// `MULTI`: a concurrent rebuild or grab cannot double anything. The outbox is left as it is.
    /// Returns false when the cache is already there.
    pub async fn rebuild(&self, _lock: &RebuildLock, event: &Event, holdings: &Holdings) -> Result<bool, GateError> {
        let e = &event.id;
        let mut conn = self.link.conn().await?;
        let opening = opening_on(&mut conn, e).await?;
        if conn.hexists::<_, _, bool>(keys::meta(e), &opening).await? {
            return Ok(false);
        }
        let mut pipe = redis::pipe();
        pipe.atomic();
        fill(&mut pipe, event, holdings, &opening);
        pipe.del(keys::lost_since(e)).ignore();
        pipe.query_async::<()>(&mut conn).await?;
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

/// The commands that lay down an event's whole cache (inside a `MULTI`): meta with its users'
/// fields, the numbers on sale and those held for the waitlist, and the waitlist itself. The outbox
/// is left as it is.
fn fill(pipe: &mut redis::Pipeline, event: &Event, holdings: &Holdings, opening: &str) {
    let e = &event.id;
    for key in [keys::seats(e), keys::meta(e), keys::returned(e), keys::wait(e), keys::waiting(e)] {
        pipe.del(key).ignore();
    }
    let on_sale: Vec<u32> = (1..=event.capacity)
        .filter(|&n| !holdings.held.contains(&TicketNo::new(n)) && !holdings.returned.contains(&TicketNo::new(n)))
        .collect();
    for chunk in on_sale.chunks(WARM_CHUNK as usize) {
        pipe.rpush(keys::seats(e), chunk).ignore();
    }
    let returned: Vec<u32> = holdings.returned.iter().map(|n| n.get()).collect();
    for chunk in returned.chunks(WARM_CHUNK as usize) {
        pipe.rpush(keys::returned(e), chunk).ignore();
    }
    for chunk in holdings.buyers.chunks(WARM_CHUNK as usize) {
        let fields: Vec<(String, String)> =
            chunk.iter().map(|b| (keys::user_field(&b.user), keys::holding(&b.holding()))).collect();
        pipe.hset_multiple(keys::meta(e), &fields).ignore();
    }
    for chunk in holdings.cancelled.chunks(WARM_CHUNK as usize) {
        // A number still to be given back stays with its order, so the give-back can run on it.
        let fields: Vec<(String, String)> = chunk
            .iter()
            .map(|c| {
                let value = if c.give_back_pending { keys::holding(&c.holding()) } else { keys::cancelled(&c.order) };
                (keys::user_field(&c.user), value)
            })
            .collect();
        pipe.hset_multiple(keys::meta(e), &fields).ignore();
    }
    for (order, message) in &holdings.promotions {
        pipe.hset(keys::outbox(e), order.as_str(), message).ignore();
    }
    for chunk in holdings.waiting.chunks(WARM_CHUNK as usize) {
        let places: Vec<(u64, &str)> = chunk.iter().map(|w| (w.place, w.user.as_str())).collect();
        pipe.zadd_multiple(keys::wait(e), &places).ignore();
        let heads: Vec<(&str, String)> =
            chunk.iter().map(|w| (w.user.as_str(), WaitHead::new(e, &w.user, &w.email).as_str().to_owned())).collect();
        pipe.hset_multiple(keys::waiting(e), &heads).ignore();
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
        keys::meta(e),
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
            // A value longer than `hash-max-listpack-value` (64 bytes) makes Redis keep meta as a
            // hash table from the start: as a listpack, its first 512 user fields would each be
            // found by a linear scan, costing the first grabs of every event more than the rest.
            ("layout", keys::LAYOUT.to_owned()),
        ],
    )
    .ignore();
    let forget_at = epoch_ms(event.active_until()) + CACHE_AFTER_END.as_millis() as i64;
    for key in [keys::meta(e), keys::seats(e), keys::returned(e), keys::wait(e), keys::waiting(e)] {
        pipe.cmd("PEXPIREAT").arg(key).arg(forget_at).ignore();
    }
}
