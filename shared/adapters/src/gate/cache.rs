//! Laying down an event's whole cache: warmed at release, rebuilt exactly from DynamoDB after a
//! loss (under a lock, once the loss has settled), and the layout check that rebuilds an older
//! layout's cache at once.

use std::sync::LazyLock;

use redis::AsyncCommands;

use super::{CACHE_AFTER_END, CLOCK_TRUST, Gate, GateError, keys, opening_arg, opening_on, script_time};
use domain::{Event, EventId, Holdings, TicketNo, event::epoch_ms, order::WaitHead, sale_mode::SaleMode};

/// The latest time the scripts' format holds (15 digits of epoch ms): a window opening then never
/// opens. `give_back.lua` knows a ballot by it (a copy, held to this one by the test below).
const NEVER: i64 = 999_999_999_999_999;

static UNLOCK_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(include_str!("unlock.lua")));

/// How many ticket numbers one `RPUSH` carries when an event is warmed.
const WARM_CHUNK: u32 = 10_000;

static STOP_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(super::cache_script!("stop.lua", opening = ARGV[1])));
static OPEN_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(include_str!("open.lua")));

/// How long a bucket remembers the rebuild that stopped it: longer than any rebuild runs.
const STOP_KEPT: std::time::Duration = std::time::Duration::from_secs(600);

/// The event's rebuild lock, held (`Gate::lock_rebuild`). Its token also names the rebuild that
/// stopped the buckets (`Gate::stop`), its staged keys and the generation it lays down.
pub struct RebuildLock {
    event: EventId,
    token: String,
}

impl RebuildLock {
    pub fn token(&self) -> &str {
        &self.token
    }
}

/// How a bucket stopped (`stop.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// Open in this history until now: intact, and deciding (the consumer removing entries) a
    /// moment ago.
    Live,
    /// Intact (open in this history when a rebuild first stopped it), stopped since.
    Intact,
    /// Lost, or written in another history: its outbox may lack orders.
    Lost,
}

impl Stopped {
    /// Its outbox holds every order of it not yet stored.
    pub fn intact(self) -> bool {
        self != Self::Lost
    }
}

/// How a rebuild's lay-down ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaidDown {
    /// Every bucket laid down and deciding again.
    Open,
    /// Another rebuild stopped a bucket since this one did: that one lays the event down.
    Fenced,
    /// Stopped by a test part way.
    Halted,
}

/// The keys of a bucket a lay-down writes whole (meta first: its opening field opens the bucket).
fn laid_keys(b: &keys::Bucket) -> [String; 5] {
    [keys::meta(b), keys::seats(b), keys::returned(b), keys::wait(b), keys::waiting(b)]
}

/// The keys of a bucket's steps under way (numbers moving, a hand to the line), forgotten by a
/// lay-down: it lays every number down afresh, and each such step is held to the generation it
/// began in.
fn under_way_keys(b: &keys::Bucket) -> [String; 4] {
    [keys::moving(b), keys::moved(b), keys::giving(b), keys::handed(b)]
}

impl Gate {
    /// Fills the cache for a freshly released event: every ticket number free, no user field. One
    /// `MULTI` so a grab never sees half an event; `meta` goes last because its presence is what
    /// "warmed" means. The outbox is never touched: only the consumer and reconcile remove entries.
    pub async fn warm(&self, event: &Event) -> Result<(), GateError> {
        let buckets = self.buckets.learn(&event.id, event.buckets);
        let mut conn = self.link.conn().await?;
        let generation = uuid::Uuid::now_v7().to_string();
        // The sent records first: a bucket's first order is kept in its record before it is sent.
        self.warm_sent(&mut conn, &buckets, &generation, forget_at(event)).await?;
        // Bucket 0 last: its meta is what "warmed" means to a grab that has not read the count.
        for bucket in buckets.iter().rev() {
            let mut pipe = redis::pipe();
            pipe.atomic();
            let opening = opening_on(&mut conn, bucket).await?;
            for key in under_way_keys(bucket) {
                pipe.del(key).ignore();
            }
            fill(&mut pipe, event, &buckets, bucket, &Holdings::default(), &opening, &generation, |live| live);
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
        let token = self.take_lease(&keys::rebuild_lock(event), ttl).await?;
        Ok(token.map(|token| RebuildLock { event: event.clone(), token }))
    }

    /// Releases the lock if it is still this rebuild's (it may have expired and been taken).
    pub async fn unlock_rebuild(&self, lock: RebuildLock) -> Result<(), GateError> {
        self.give_back_lease(&keys::rebuild_lock(&lock.event), &lock.token).await
    }

    /// Takes the reconcile run's lease (`SET NX PX`): its token, or `None` while another run holds
    /// it.
    pub async fn lease_run(&self, ttl: std::time::Duration) -> Result<Option<String>, GateError> {
        self.take_lease(keys::RECONCILE_RUN, ttl).await
    }

    /// Gives the run's lease back if it is still this run's.
    pub async fn end_run(&self, token: &str) -> Result<(), GateError> {
        self.give_back_lease(keys::RECONCILE_RUN, token).await
    }

    /// The events a warm fleet is kept for now ([`keys::WARMING`]), for `ttl`; none: the key goes.
    pub async fn set_warming(&self, events: &[&EventId], ttl: std::time::Duration) -> Result<(), GateError> {
        let mut conn = self.link.conn().await?;
        if events.is_empty() {
            let _: i64 = redis::cmd("DEL").arg(keys::WARMING).query_async(&mut conn).await?;
            return Ok(());
        }
        let ids: Vec<&str> = events.iter().map(|e| e.as_str()).collect();
        let _: () = redis::cmd("SET")
            .arg(keys::WARMING)
            .arg(ids.join(","))
            .arg("PX")
            .arg(ttl.as_millis().max(1) as u64)
            .query_async(&mut conn)
            .await?;
        Ok(())
    }

    /// The events a warm fleet is kept for now, as reconcile last wrote them (ids that do not
    /// parse are left out).
    pub async fn warming(&self) -> Result<Vec<EventId>, GateError> {
        let ids: Option<String> =
            redis::cmd("GET").arg(keys::WARMING).query_async(&mut self.link.conn().await?).await?;
        Ok(ids.unwrap_or_default().split(',').filter_map(|id| EventId::parse(id).ok()).collect())
    }

    /// `key` held for `ttl` under a fresh token (`SET NX PX`): the token, or `None` while another
    /// holds it. The rebuild's lock and reconcile's run are such leases.
    async fn take_lease(&self, key: &str, ttl: std::time::Duration) -> Result<Option<String>, GateError> {
        let token = uuid::Uuid::now_v7().to_string();
        let taken: Option<String> = redis::cmd("SET")
            .arg(key)
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(ttl.as_millis().max(1) as u64)
            .query_async(&mut self.link.conn().await?)
            .await?;
        Ok(taken.map(|_| token))
    }

    /// Gives `key` back if `token` still holds it (it may have expired and been taken since).
    async fn give_back_lease(&self, key: &str, token: &str) -> Result<(), GateError> {
        let _: i64 = UNLOCK_SCRIPT.key(key).arg(token).invoke_async(&mut self.link.conn().await?).await?;
        Ok(())
    }

    /// The event's buckets, as its stored item gives their count (a rebuild never reads the count
    /// from the cache it rebuilds: bucket 0 may be the bucket lost).
    pub fn buckets_of(&self, event: &Event) -> keys::Buckets {
        self.buckets.learn(&event.id, event.buckets)
    }

    /// The rebuild's first step: every bucket stops deciding (`stop.lua`: its opening field goes,
    /// and the lock's token is the one that may open it again), all at once. Says, bucket by
    /// bucket, how it stopped ([`Stopped`]).
    pub async fn stop(&self, buckets: &keys::Buckets, lock: &RebuildLock) -> Result<Vec<Stopped>, GateError> {
        let conn = self.link.conn().await?;
        let stops = buckets.iter().map(|bucket| {
            let mut conn = conn.clone();
            async move {
                let intact: i64 = STOP_SCRIPT
                    .key(keys::meta(bucket))
                    .key(keys::stopped(bucket))
                    .arg(opening_arg(&conn))
                    .arg(&lock.token)
                    .arg(STOP_KEPT.as_millis() as u64)
                    .arg(keys::OLDER_OPENING_PREFIX)
                    .invoke_async(&mut conn)
                    .await?;
                Ok::<_, GateError>(match intact {
                    2 => Stopped::Live,
                    1 => Stopped::Intact,
                    _ => Stopped::Lost,
                })
            }
        });
        futures::future::try_join_all(stops).await
    }

    /// The rebuild's last step: every bucket's sent record laid down with `undelivered` (the orders
    /// of its outbox that may be on the queue), then each bucket laid down from `holdings` under
    /// staged names and opened (`open.lua`), bucket 0 last, each only while `lock`'s stop still
    /// holds it (and its record).
    /// A test may stop after `stop_after` buckets. The outbox is left as it is, but for the
    /// rebuild's promotions and the orders found only in a sent record, which join it.
    pub async fn lay_down(
        &self,
        lock: &RebuildLock,
        event: &Event,
        buckets: &keys::Buckets,
        holdings: &Holdings,
        undelivered: &[super::OutboxEntry],
        stop_after: Option<u16>,
    ) -> Result<LaidDown, GateError> {
        let mut conn = self.link.conn().await?;
        // Every sent record before any bucket opens: a bucket's first order after the rebuild is
        // kept in its record, in the new generation.
        for bucket in buckets.iter() {
            let homed: Vec<&super::OutboxEntry> = undelivered
                .iter()
                .filter(|e| domain::OrderMessage::parse(&e.message).is_ok_and(|m| buckets.home(&m.user_id) == bucket))
                .collect();
            if !self.lay_sent(&mut conn, bucket, lock, forget_at(event), &homed).await? {
                return Ok(LaidDown::Fenced);
            }
        }
        for (laid, bucket) in buckets.iter().rev().enumerate() {
            if stop_after == Some(laid as u16) {
                return Ok(LaidDown::Halted);
            }
            let opening = opening_on(&mut conn, bucket).await?;
            let staged = |live: String| keys::staged(&live, &lock.token);
            let mut pipe = redis::pipe();
            pipe.atomic();
            fill(&mut pipe, event, buckets, bucket, holdings, &opening, &lock.token, staged);
            pipe.query_async::<()>(&mut conn).await?;
            let mut open = OPEN_SCRIPT.key(keys::stopped(bucket));
            for live in laid_keys(bucket) {
                let staged = keys::staged(&live, &lock.token);
                open.key(live).key(staged);
            }
            open.key(keys::outbox(bucket)).key(keys::staged(&keys::outbox(bucket), &lock.token));
            for under_way in under_way_keys(bucket) {
                open.key(under_way);
            }
            let opened: String = open.arg(&lock.token).arg(laid_keys(bucket).len()).invoke_async(&mut conn).await?;
            if opened != "OPEN" {
                return Ok(LaidDown::Fenced);
            }
        }
        conn.del::<_, ()>(keys::lost_since(&event.id)).await?;
        Ok(LaidDown::Open)
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

    /// Whether the event's cache may be repaired now: not repaired within `every`.
    pub async fn may_repair(&self, event: &EventId, every: std::time::Duration) -> Result<bool, GateError> {
        self.not_within(&keys::repaired(event), every).await
    }

    /// Whether reconcile may look at the event's cache whole now: not looked at within `every`.
    pub async fn may_look_whole(&self, event: &EventId, every: std::time::Duration) -> Result<bool, GateError> {
        self.not_within(&keys::looked_whole(event), every).await
    }

    /// Whether `mark` was not set within `every` (it is set by this call, `SET NX PX`); always
    /// for a zero span.
    async fn not_within(&self, mark: &str, every: std::time::Duration) -> Result<bool, GateError> {
        if every.is_zero() {
            return Ok(true);
        }
        let set: Option<String> = redis::cmd("SET")
            .arg(mark)
            .arg(1)
            .arg("NX")
            .arg("PX")
            .arg(every.as_millis() as u64)
            .query_async(&mut self.link.conn().await?)
            .await?;
        Ok(set.is_some())
    }

    /// Records when the cache was first seen lost and returns that time (epoch ms); `again`: from
    /// now (a bucket was deciding until the stop just made). The mark expires by itself; a rebuild
    /// removes it.
    pub async fn mark_lost(&self, event: &EventId, now_ms: i64, again: bool) -> Result<i64, GateError> {
        let mut conn = self.link.conn().await?;
        let mut set = redis::cmd("SET");
        set.arg(keys::lost_since(event)).arg(now_ms);
        if !again {
            set.arg("NX");
        }
        let (_, since): ((), Option<i64>) = redis::pipe()
            .add_command(set)
            .arg("PX")
            .arg(600_000)
            .cmd("GET")
            .arg(keys::lost_since(event))
            .query_async(&mut conn)
            .await?;
        Ok(since.unwrap_or(now_ms))
    }
}

/// When the event's cache expires (epoch ms): [`CACHE_AFTER_END`] after its sale and cancellations.
fn forget_at(event: &Event) -> i64 {
    epoch_ms(event.active_until()) + CACHE_AFTER_END.as_millis() as i64
}

/// The commands that lay down one bucket of an event's cache (inside a `MULTI`; an unsharded
/// event has one, the whole cache): meta with the event's fields and its home users' fields, the
/// free numbers whose bucket it is (`Buckets::shelf_of`) on sale, the promotions the rebuild made
/// for its home users, and at bucket 0 the waitlist and the numbers held for it. The outbox is
/// left as it is otherwise; takes and hands under way are forgotten (their steps answer GONE, and
/// reconcile finds nothing to settle: a give-back runs again from its marker).
#[allow(clippy::too_many_arguments)]
fn fill(
    pipe: &mut redis::Pipeline,
    event: &Event,
    buckets: &keys::Buckets,
    bucket: &keys::Bucket,
    holdings: &Holdings,
    opening: &str,
    generation: &str,
    named: impl Fn(String) -> String,
) {
    let b = bucket;
    let here = |n: &TicketNo| buckets.shelf_of(*n) == bucket;
    let homed = |u: &domain::UserId| buckets.home(u) == bucket;
    let [meta, seats, returned_key, wait, waiting] = laid_keys(b).map(&named);
    // The promotions the rebuild made join the outbox when the bucket opens, not before.
    let promotions = named(keys::outbox(b));
    let laid = [&seats, &meta, &returned_key, &wait, &waiting];
    for key in laid {
        pipe.del(key).ignore();
    }
    if promotions != keys::outbox(b) {
        pipe.del(&promotions).ignore();
    }
    let on_sale: Vec<u32> = (1..=event.capacity)
        .map(TicketNo::new)
        .filter(|n| here(n) && !holdings.held.contains(n) && !holdings.returned.contains(n))
        .map(TicketNo::get)
        .collect();
    for chunk in on_sale.chunks(WARM_CHUNK as usize) {
        pipe.rpush(&seats, chunk).ignore();
    }
    // The waitlist's line, with the numbers held for it, is bucket 0's; each promotion the
    // rebuild made goes to the outbox at its user's home, beside their holding.
    let line = bucket.index() == 0;
    if line {
        let returned: Vec<u32> = holdings.returned.iter().map(|n| n.get()).collect();
        for chunk in returned.chunks(WARM_CHUNK as usize) {
            pipe.rpush(&returned_key, chunk).ignore();
        }
    }
    let buyers: Vec<_> = holdings.buyers.iter().filter(|x| homed(&x.user)).collect();
    for chunk in buyers.chunks(WARM_CHUNK as usize) {
        let fields: Vec<(String, String)> =
            chunk.iter().map(|b| (keys::user_field(&b.user), keys::holding(&b.holding()))).collect();
        pipe.hset_multiple(&meta, &fields).ignore();
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
        pipe.hset_multiple(&meta, &fields).ignore();
    }
    for (order, message) in holdings.promotions.iter().chain(&holdings.restored) {
        let user = domain::OrderMessage::parse(message).map(|m| m.user_id);
        if user.map_or(line, |u| homed(&u)) {
            pipe.hset(&promotions, order.as_str(), message).ignore();
        }
    }
    if line {
        for chunk in holdings.waiting.chunks(WARM_CHUNK as usize) {
            let places: Vec<(u64, &str)> = chunk.iter().map(|w| (w.place, w.user.as_str())).collect();
            pipe.zadd_multiple(&wait, &places).ignore();
            let heads: Vec<(&str, String)> = chunk
                .iter()
                .map(|w| (w.user.as_str(), WaitHead::new(&event.id, &w.user, &w.email).as_str().to_owned()))
                .collect();
            pipe.hset_multiple(&waiting, &heads).ignore();
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
        &meta,
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
            // Which lay-down this is (a rebuild's token, or a fresh id at warming): a step of a
            // sharded event that spans buckets names it, so a step begun before a rebuild finds
            // nothing to finish after it.
            ("generation", generation.to_owned()),
            // A value longer than `hash-max-listpack-value` (64 bytes) makes Redis keep meta as a
            // hash table from the start: as a listpack, its first 512 user fields would each be
            // found by a linear scan, costing the first grabs of every event more than the rest.
            ("layout", keys::LAYOUT.to_owned()),
        ],
    )
    .ignore();
    for key in laid {
        pipe.cmd("PEXPIREAT").arg(key).arg(forget_at(event)).ignore();
    }
    if promotions != keys::outbox(b) {
        // Staged promotions live only until their bucket opens.
        pipe.cmd("PEXPIRE").arg(&promotions).arg(STOP_KEPT.as_millis() as u64).ignore();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_give_back_script_knows_a_ballot_by_the_opening_it_is_laid_with() {
        let never = script_time(NEVER);
        assert!(include_str!("give_back.lua").contains(&format!("m[1] == '{never}'")), "give_back.lua names {never}");
    }
}
