//! The Redis gate (ElastiCache): the grab script and the few typed reads and writes around it.
//!
//! Every key of one event carries the hash tag `{<event id>}` so one script touches one cluster
//! slot (DESIGN.md section 6).

use std::sync::LazyLock;

use redis::AsyncCommands;

mod admit;
mod after_sale;
mod link;
pub use admit::Admitted;
pub use after_sale::{GaveBack, GiveBack, Join, WaitlistPlace, Waitlisted};
pub use link::Connection;
use link::{Link, LinkConn};

use crate::{
    config::{GateSettings, GrabPolicy, UserLimit},
    domain::{
        Buyer, Event, EventId, Holdings, OrderId, UserId,
        event::epoch_ms,
        order::{MessageHead, WaitHead},
    },
};

/// The grab script, loaded once per execution environment and run with `EVALSHA`; the redis
/// crate loads it again by itself when a server answers `NOSCRIPT` (after a restart or failover).
static GRAB_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(include_str!("grab.lua")));

/// In cluster mode, the opening field of the node that serves the key it is given (`keys::opening`
/// of its `CLUSTER MYID`; ARGV[1] is [`keys::opening_prefix`]), routed by that key like any command
/// of the event.
static NODE_OPENING_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new("return ARGV[1] .. string.sub(redis.call('CLUSTER', 'MYID'), 1, 12)"));

static CLOSE_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(include_str!("close.lua")));

static UNLOCK_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(include_str!("unlock.lua")));

/// How far from the sale's boundaries the caller's clock decides the window (DESIGN.md section 6);
/// nearer, Redis's own clock does. Lambda clocks are NTP-synchronised to milliseconds.
pub const CLOCK_TRUST: std::time::Duration = std::time::Duration::from_secs(10);

/// How long an event's cache outlives its sale: long enough for the orders still on the queue to
/// be stored (a user's `PENDING` order is read from it meanwhile), then Redis forgets the event.
/// The outbox has no expiry: a hash disappears by itself once its last entry is removed.
pub const CACHE_AFTER_END: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// The version of the cache's layout: its keys and the meaning of meta's fields. It is part of the
/// opening field's name ([`keys::opening`]), which every script reads first anyway, so a cache
/// written by another layout reads as not cached in this history, at no cost, and is rebuilt
/// from DynamoDB on first touch (at once: nothing of it was lost, see `Gate::layout_outdated`).
pub const LAYOUT_VERSION: &str = "v4";

/// What the meta hash's user fields mean, stored in meta itself (for a person reading the cache).
const LAYOUT: &str = "v4: =<user> holds <order id>:<ticket no>, #<window end ms>:<refused count> or \
                      !<cancelled order id>; closed: the waitlist is closed";

/// How many ticket numbers one `RPUSH` carries when an event is warmed.
const WARM_CHUNK: u32 = 10_000;

/// The Redis keys of one event (DESIGN.md section 6).
pub mod keys {
    use crate::domain::{EventId, UserId};

    /// The event (`capacity`, `start`, `end`, `state`) and one field per user: see [`user_field`].
    pub fn meta(e: &EventId) -> String {
        format!("ev:{{{e}}}:meta")
    }
    /// The free ticket numbers.
    pub fn seats(e: &EventId) -> String {
        format!("ev:{{{e}}}:seats")
    }
    /// Order id -> order message, until DynamoDB holds the order.
    pub fn outbox(e: &EventId) -> String {
        format!("ev:{{{e}}}:outbox")
    }
    /// The user's field in `meta`: `<order id>:<ticket no>` when they hold an order, else
    /// `#<window end ms>:<count>`, their refused requests in the rate window. The `=` keeps it
    /// apart from the event's own fields.
    pub fn user_field(u: &UserId) -> String {
        format!("={u}")
    }
    /// One user's requests to one function (`query`, `verify-hash`) in the current window. Hashed on
    /// the user, so a user's counters share a slot.
    pub fn user_requests(u: &UserId, function: &str) -> String {
        format!("rl:{{{u}}}:{function}")
    }
    /// The meta field that says the event is cached in this server's history (the primary's
    /// replication id, or in cluster mode the node's id, to 12 hex digits: `gate::link`) by this
    /// layout ([`super::LAYOUT_VERSION`]): `open_from`, the start of the span where the caller's
    /// clock decides, under a name carrying both. A cache from another history or layout lacks it
    /// and reads as not cached, at no cost to the scripts, which read the field anyway.
    pub fn opening(history: &str) -> String {
        format!("{}{history}", opening_prefix())
    }
    /// [`opening`] without its history: what a script is given in cluster mode, where it asks its
    /// node for the history (a scripts' argument ending in `@`).
    pub fn opening_prefix() -> String {
        format!("open_from@{}@", super::LAYOUT_VERSION)
    }
    /// The opening fields of the layouts before this one in `history` (v2 and v3 named it
    /// `open_from@<history>`): such a cache is intact, only laid out otherwise.
    pub fn older_openings(history: &str) -> [String; 1] {
        [format!("open_from@{history}")]
    }
    /// The waitlist: waiting user id -> place (a sorted set; the lowest place is served first).
    pub fn wait(e: &EventId) -> String {
        format!("ev:{{{e}}}:wait")
    }
    /// Waiting user id -> the head of the order message their promotion completes.
    pub fn waiting(e: &EventId) -> String {
        format!("ev:{{{e}}}:waiting")
    }
    /// Numbers returned after the sale's end while nobody waited: held for the next user who joins
    /// the waitlist (until `cancel_until`; then unsold).
    pub fn returned(e: &EventId) -> String {
        format!("ev:{{{e}}}:returned")
    }
    /// Everything a lost cache loses: what the grab script reads and writes, and the waitlist.
    pub fn cache(e: &EventId) -> [String; 6] {
        [meta(e), seats(e), outbox(e), wait(e), waiting(e), returned(e)]
    }
    /// When the loss of the event's cache was first seen (epoch ms), while it is being rebuilt.
    pub fn lost_since(e: &EventId) -> String {
        format!("ev:{{{e}}}:lost")
    }
    /// Held while the event's cache is rebuilt from DynamoDB.
    pub fn rebuild_lock(e: &EventId) -> String {
        format!("ev:{{{e}}}:lock")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("unexpected reply from redis: {0}")]
    Protocol(String),
    /// The endpoint leads to a replica (a failover under way): nothing is read or written there.
    #[error("redis endpoint leads to a replica")]
    NotPrimary,
    /// The event's cache was written by another primary (before a failover) and is not rebuilt yet.
    #[error("the event's cache predates a failover")]
    Stale,
}

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
    Already {
        order_id: String,
        ticket_no: u32,
    },
    /// The user cancelled this order: one ticket per user, even a given-back one.
    Cancelled {
        order_id: String,
    },
    SoldOut,
    Granted {
        order_id: String,
        ticket_no: u32,
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
            Self::Already { .. } => "ALREADY",
            Self::Cancelled { .. } => "CANCELLED",
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
    /// [`CLOCK_TRUST`], where the script asks Redis's `TIME` instead.
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

/// An order waiting in the outbox for DynamoDB to hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxEntry {
    pub order_id: String,
    /// The order message, exactly as the SQS body carries it.
    pub message: String,
}

/// The event's rebuild lock, held (`Gate::lock_rebuild`).
pub struct RebuildLock {
    event: EventId,
    token: String,
}

/// The sale window as Redis holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub start_ms: i64,
    pub end_ms: i64,
    /// Holders may cancel, and the waitlist be joined, until then.
    pub cancel_until_ms: i64,
    pub closed: bool,
}

impl Window {
    /// Until when the event is live: its sale, then its cancellation window.
    pub fn active_until_ms(&self) -> i64 {
        self.end_ms.max(self.cancel_until_ms)
    }
}

/// A grab the script decided, and the connection that wrote it.
pub struct Grabbed {
    pub outcome: GrabOutcome,
    pub written: Written,
}

/// The server a grab was written on: [`Gate::replicated`] asks how many of its replicas have it.
pub struct Written {
    conn: LinkConn,
    /// The event's meta key: in cluster mode it names the node that holds the write.
    key: String,
}

#[derive(Clone)]
pub struct Gate {
    link: Link,
    replica_wait: std::time::Duration,
}

impl Gate {
    /// Builds the gate without connecting: a cold start never fails because Redis is down; the
    /// first command fails fast instead and the caller answers `503 BUSY`.
    pub fn new(settings: &GateSettings) -> Result<Self, GateError> {
        let link = if settings.cluster {
            // The configuration endpoint (a name that leads to every node), or nodes listed with
            // commas: the client finds the cluster again from them after a node is lost.
            let mut builder = redis::cluster::ClusterClient::builder(settings.redis_url.split(',').map(str::trim));
            if let Some(token) = &settings.auth_token {
                builder = builder.password(token.clone());
            }
            let client = builder
                .connection_timeout(settings.connect_timeout)
                .response_timeout(settings.command_timeout)
                // One quick retry (a moved slot, a reconnect), no retry storm against a cluster in trouble.
                .retries(1)
                .build()?;
            Link::cluster(client)
        } else {
            let client = redis::Client::open(with_token(&settings.redis_url, settings.auth_token.as_deref())?)?;
            Link::primary(client, settings.connect_timeout, settings.command_timeout)
        };
        Ok(Self { link, replica_wait: settings.replica_wait })
    }

    /// A connection of its own, for tests and tools that inspect the keys (not bound to a history;
    /// it reconnects by itself).
    pub async fn connection(&self) -> Result<Connection, GateError> {
        self.link.inspection().await
    }

    /// The meta field that says `event` is cached in the current history (DESIGN.md section 6).
    pub async fn opening(&self, event: &EventId) -> Result<String, GateError> {
        let mut conn = self.link.conn().await?;
        opening_on(&mut conn, event).await
    }

    pub async fn grab(&self, attempt: &GrabAttempt<'_>, policy: GrabPolicy) -> Result<Grabbed, GateError> {
        let e = attempt.event;
        let mut conn = self.link.conn().await?;
        let mut call = GRAB_SCRIPT.key(keys::meta(e));
        call.key(keys::seats(e)).key(keys::outbox(e));
        let opening = opening_arg(&conn);
        for arg in attempt.script_args(policy, &opening) {
            call.arg(arg);
        }
        let reply: String = call.invoke_async(&mut conn).await?;
        let mut outcome = parse_grab_reply(&reply, attempt.order_id.as_str(), policy)?;
        if let GrabOutcome::Granted { ticket_no, message, .. } = &mut outcome {
            *message = attempt.head.complete(*ticket_no);
        }
        Ok(Grabbed { outcome, written: Written { conn, key: keys::meta(e) } })
    }

    /// How many replicas hold what `written`'s connection wrote, waiting up to the configured
    /// time for one (`WAIT` counts the writes of the connection it is sent on, so it goes on
    /// that one). 0 at once when the server has no replica: `WAIT` holds its connection, and
    /// everything queued behind it, for the whole timeout.
    pub async fn replicated(&self, written: &Written) -> Result<u32, GateError> {
        let mut conn = written.conn.clone();
        let info: String = conn.on_node_of(&written.key, redis::cmd("INFO").arg("replication")).await?;
        if link::replicas(&info) == 0 {
            return Ok(0);
        }
        let timeout = self.replica_wait.as_millis().max(1) as u64;
        conn.on_node_of(&written.key, redis::cmd("WAIT").arg(1).arg(timeout)).await
    }

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

    /// What the audit needs of the cache, read in one step (`MULTI`): the numbers on sale and held
    /// for the waitlist, the outbox's orders and the waitlist's length. `None` when the event is
    /// not cached in this history.
    pub async fn audit_view(&self, event: &EventId) -> Result<Option<crate::domain::audit::CacheView>, GateError> {
        let mut conn = self.link.conn().await?;
        let opening = opening_on(&mut conn, event).await?;
        type View = (bool, Vec<u32>, Vec<u32>, Vec<(String, String)>, u64);
        let (cached, on_sale, returned, outbox, waiting): View = redis::pipe()
            .atomic()
            .hexists(keys::meta(event), &opening)
            .lrange(keys::seats(event), 0, -1)
            .lrange(keys::returned(event), 0, -1)
            .hgetall(keys::outbox(event))
            .zcard(keys::wait(event))
            .query_async(&mut conn)
            .await?;
        if !cached {
            return Ok(None);
        }
        let outbox = outbox
            .into_iter()
            .filter_map(|(order, message)| {
                crate::domain::OrderMessage::parse(&message).ok().map(|m| (order, m.ticket_no))
            })
            .collect();
        Ok(Some(crate::domain::audit::CacheView { on_sale, returned, outbox, waiting }))
    }

    /// The waitlist of a cache an older layout wrote (which kept it only in Redis), by place.
    pub async fn older_waitlist(&self, event: &EventId) -> Result<Vec<crate::domain::Waiter>, GateError> {
        let mut conn = self.link.conn().await?;
        let (places, heads): (Vec<(String, u64)>, std::collections::HashMap<String, String>) = redis::pipe()
            .atomic()
            .zrange_withscores(keys::wait(event), 0, -1)
            .hgetall(keys::waiting(event))
            .query_async(&mut conn)
            .await?;
        let mut waiters = Vec::new();
        for (user, place) in places {
            let Some(head) = heads.get(&user) else { continue };
            // The head is an order message without its tail: completed with any, it tells the address.
            let whole =
                format!("{head}{},\"ticket_no\":1}}", WaitHead::tail(&OrderId::generate(), "1970-01-01T00:00:00Z"));
            let message = crate::domain::OrderMessage::parse(&whole)
                .map_err(|e| GateError::Protocol(format!("an older waitlist head: {e}")))?;
            waiters.push(crate::domain::Waiter { user: message.user_id, email: message.email, place });
        }
        Ok(waiters)
    }

    /// Closes the event's waitlist (`close.lua`): nobody is promoted any more, and the waiting
    /// users' places and addresses leave Redis. Returns how many were still waiting there.
    pub async fn close_waitlist(&self, event: &EventId) -> Result<u64, GateError> {
        Ok(CLOSE_SCRIPT
            .key(keys::meta(event))
            .key(keys::wait(event))
            .key(keys::waiting(event))
            .invoke_async(&mut self.link.conn().await?)
            .await?)
    }

    /// Counts one request of `user` to `function` in a fixed window (one round trip: `INCR`, an
    /// expiry set only by the window's first request, `PTTL`). Returns the wait in milliseconds
    /// when the user is over the limit.
    pub async fn count_request(
        &self,
        user: &UserId,
        function: &str,
        limit: UserLimit,
    ) -> Result<Option<u64>, GateError> {
        let key = keys::user_requests(user, function);
        let window = limit.window.as_millis() as u64;
        let (count, ttl): (u64, i64) = redis::pipe()
            .incr(&key, 1)
            .cmd("PEXPIRE")
            .arg(&key)
            .arg(window)
            .arg("NX")
            .ignore()
            .cmd("PTTL")
            .arg(&key)
            .query_async(&mut self.link.conn().await?)
            .await?;
        Ok((count > u64::from(limit.requests)).then(|| ttl.clamp(1, window as i64) as u64))
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

    /// Outbox entries older than `age` on the server's clock (age from the UUIDv7 order id), at
    /// most `limit`. An entry whose id tells no age is due at once, so reconcile looks at it.
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
        let mut cursor = 0u64;
        loop {
            let (next, page): (u64, Vec<(String, String)>) = redis::cmd("HSCAN")
                .arg(keys::outbox(event))
                .arg(cursor)
                .arg("COUNT")
                .arg(500)
                .query_async(&mut conn)
                .await?;
            for (order_id, message) in page {
                let made = OrderId::parse(&order_id).ok().and_then(|o| o.created_ms());
                if made.is_none_or(|ms| ms <= cutoff) {
                    due.push(OutboxEntry { order_id, message });
                }
            }
            cursor = next;
            if cursor == 0 || due.len() >= limit {
                due.truncate(limit);
                return Ok(due);
            }
        }
    }

    pub async fn outbox_len(&self, event: &EventId) -> Result<u64, GateError> {
        Ok(self.link.conn().await?.hlen(keys::outbox(event)).await?)
    }

    /// Every outbox entry (tests and tools; the outbox is small outside a sale's first seconds).
    pub async fn outbox(&self, event: &EventId) -> Result<Vec<OutboxEntry>, GateError> {
        let all: Vec<(String, String)> = self.link.conn().await?.hgetall(keys::outbox(event)).await?;
        Ok(all.into_iter().map(|(order_id, message)| OutboxEntry { order_id, message }).collect())
    }

    /// Free ticket numbers left, or `None` when the event is not in the cache (or only in a cache
    /// written before a failover).
    pub async fn stock(&self, event: &EventId) -> Result<Option<u32>, GateError> {
        Ok(self.stocks(std::slice::from_ref(event)).await?.pop().flatten())
    }

    /// The live stock of many events in one round trip (`None` where not cached).
    pub async fn stocks(&self, events: &[EventId]) -> Result<Vec<Option<u32>>, GateError> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let mut conn = self.link.conn().await?;
        let Some(history) = conn.history() else {
            // A cluster answers per slot: one event at a time, the events' nodes in parallel.
            let each = events.iter().map(|e| {
                let mut conn = conn.clone();
                async move {
                    let opening = opening_on(&mut conn, e).await?;
                    let (current, left): (bool, u32) = redis::pipe()
                        .hexists(keys::meta(e), &opening)
                        .llen(keys::seats(e))
                        .query_async(&mut conn)
                        .await?;
                    Ok::<_, GateError>(current.then_some(left))
                }
            });
            return futures::future::try_join_all(each).await;
        };
        let opening = keys::opening(history);
        let mut pipe = redis::pipe();
        for e in events {
            pipe.hexists(keys::meta(e), &opening).llen(keys::seats(e));
        }
        let flat: Vec<u32> = pipe.query_async(&mut conn).await?;
        Ok(flat.chunks(2).map(|p| (p[0] == 1).then_some(p[1])).collect())
    }

    /// The sale window, or `None` when the event is not in this server's history's cache.
    pub async fn window(&self, event: &EventId) -> Result<Option<Window>, GateError> {
        let mut conn = self.link.conn().await?;
        let opening = opening_on(&mut conn, event).await?;
        type Fields = (Option<i64>, Option<i64>, Option<i64>, Option<String>, Option<String>);
        let (start, end, cancel_until, state, current): Fields = redis::cmd("HMGET")
            .arg(keys::meta(event))
            .arg(&["start", "end", "cancel_until", "state", opening.as_str()])
            .query_async(&mut conn)
            .await?;
        Ok(match (start, end, cancel_until, current) {
            (Some(start_ms), Some(end_ms), Some(cancel_until_ms), Some(_)) => {
                Some(Window { start_ms, end_ms, cancel_until_ms, closed: state.as_deref() == Some("closed") })
            }
            _ => None,
        })
    }

    /// Removes an order's outbox entry once DynamoDB holds the order.
    pub async fn remove_from_outbox(&self, event: &EventId, order_id: &str) -> Result<(), GateError> {
        let _: u32 = self.link.conn().await?.hdel(keys::outbox(event), order_id).await?;
        Ok(())
    }

    /// The order a user holds in the cache, as `(order id, ticket number)`. A cache written before
    /// a failover cannot say (the user's grab may be among the writes it lacks): an error, so the
    /// caller answers "busy" rather than "no order".
    pub async fn buyer(&self, event: &EventId, user: &UserId) -> Result<Option<(String, u32)>, GateError> {
        let mut conn = self.link.conn().await?;
        let opening = opening_on(&mut conn, event).await?;
        let (current, start, field): (Option<String>, Option<String>, Option<String>) = redis::cmd("HMGET")
            .arg(keys::meta(event))
            .arg(&[opening.as_str(), "start", keys::user_field(user).as_str()])
            .query_async(&mut conn)
            .await?;
        if current.is_none() && start.is_some() {
            return Err(GateError::Stale);
        }
        Ok(match field {
            Some(f) if !f.starts_with(['#', '!']) => Some(split_holding(&f)?),
            _ => None,
        })
    }

    /// Every holding the cache records (tests, tools and the invariant checks; one `HGETALL`).
    pub async fn holdings(&self, event: &EventId) -> Result<Vec<Buyer>, GateError> {
        let meta: Vec<(String, String)> = self.link.conn().await?.hgetall(keys::meta(event)).await?;
        buyers_in(meta)
    }

    /// The holdings and the outbox's order ids, read together (one `MULTI`), so an order the
    /// consumer stores and clears meanwhile is in one or the other: reconcile's drift check.
    pub async fn holdings_and_outbox(
        &self,
        event: &EventId,
    ) -> Result<(Vec<Buyer>, std::collections::HashSet<String>), GateError> {
        let (meta, outbox): (Vec<(String, String)>, Vec<String>) = redis::pipe()
            .atomic()
            .hgetall(keys::meta(event))
            .hkeys(keys::outbox(event))
            .query_async(&mut self.link.conn().await?)
            .await?;
        Ok((buyers_in(meta)?, outbox.into_iter().collect()))
    }
}

/// The buyers among meta's fields: `=<user>` holding `<order id>:<ticket no>`.
fn buyers_in(meta: Vec<(String, String)>) -> Result<Vec<Buyer>, GateError> {
    let mut buyers = Vec::new();
    for (field, value) in meta {
        let Some(user) = field.strip_prefix('=') else { continue };
        if value.starts_with(['#', '!']) {
            continue;
        }
        let (order, ticket_no) = split_holding(&value)?;
        let bad = |e: crate::domain::InvalidId| GateError::Protocol(format!("holding {field:?}: {e}"));
        buyers.push(Buyer {
            user: UserId::parse(user).map_err(bad)?,
            order: OrderId::parse(&order).map_err(bad)?,
            ticket_no,
        });
    }
    Ok(buyers)
}

/// The commands that lay down an event's whole cache (inside a `MULTI`): meta with its users'
/// fields, the numbers on sale and those held for the waitlist, and the waitlist itself. The outbox
/// is left as it is.
fn fill(pipe: &mut redis::Pipeline, event: &Event, holdings: &Holdings, opening: &str) {
    let e = &event.id;
    for key in [keys::seats(e), keys::meta(e), keys::returned(e), keys::wait(e), keys::waiting(e)] {
        pipe.del(key).ignore();
    }
    let on_sale: Vec<u32> =
        (1..=event.capacity).filter(|n| !holdings.held.contains(n) && !holdings.returned.contains(n)).collect();
    for chunk in on_sale.chunks(WARM_CHUNK as usize) {
        pipe.rpush(keys::seats(e), chunk).ignore();
    }
    let returned: Vec<u32> = holdings.returned.iter().copied().collect();
    for chunk in returned.chunks(WARM_CHUNK as usize) {
        pipe.rpush(keys::returned(e), chunk).ignore();
    }
    for chunk in holdings.buyers.chunks(WARM_CHUNK as usize) {
        let fields: Vec<(String, String)> =
            chunk.iter().map(|b| (keys::user_field(&b.user), format!("{}:{}", b.order, b.ticket_no))).collect();
        pipe.hset_multiple(keys::meta(e), &fields).ignore();
    }
    for chunk in holdings.cancelled.chunks(WARM_CHUNK as usize) {
        // A number still to be given back stays with its order, so the give-back can run on it.
        let fields: Vec<(String, String)> = chunk
            .iter()
            .map(|c| {
                let value = if c.returning { format!("{}:{}", c.order, c.ticket_no) } else { format!("!{}", c.order) };
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
    pipe.hset_multiple(
        keys::meta(e),
        &[
            ("capacity", event.capacity.to_string()),
            ("start", start.to_string()),
            ("end", end.to_string()),
            ("state", "open".to_owned()),
            // The span where the grab script lets the caller's clock decide, precomputed so the
            // script compares strings instead of parsing numbers.
            (opening, script_time(start + trust)),
            ("open_until", script_time(end - trust)),
            // The waitlist's rules (wait.lua).
            ("cancel_until", epoch_ms(event.cancel_until).to_string()),
            ("wait_max", event.waitlist_size.to_string()),
            // A value longer than `hash-max-listpack-value` (64 bytes) makes Redis keep meta as a
            // hash table from the start: as a listpack, its first 512 user fields would each be
            // found by a linear scan, costing the first grabs of every event more than the rest.
            ("layout", LAYOUT.to_owned()),
        ],
    )
    .ignore();
    let forget_at = epoch_ms(event.active_until()) + CACHE_AFTER_END.as_millis() as i64;
    for key in [keys::meta(e), keys::seats(e), keys::returned(e), keys::wait(e), keys::waiting(e)] {
        pipe.cmd("PEXPIREAT").arg(key).arg(forget_at).ignore();
    }
}

/// The opening field of `event` on the server `conn` leads to: from the connection's history, or in
/// cluster mode from the node that serves the event's slot.
async fn opening_on(conn: &mut LinkConn, event: &EventId) -> Result<String, GateError> {
    match conn.history() {
        Some(history) => Ok(keys::opening(history)),
        None => Ok(NODE_OPENING_SCRIPT.key(keys::meta(event)).arg(keys::opening_prefix()).invoke_async(conn).await?),
    }
}

/// A server's address with the AUTH token the cache requires (the URL itself carries none).
pub fn with_token(url: &str, token: Option<&str>) -> Result<redis::ConnectionInfo, GateError> {
    let info = redis::IntoConnectionInfo::into_connection_info(url)?;
    Ok(match token {
        Some(token) => {
            let redis = info.redis_settings().clone().set_password(token);
            info.set_redis_settings(redis)
        }
        None => info,
    })
}

/// The opening field a script is given: the whole field where the connection knows its history, the
/// prefix in cluster mode (the script completes it with its node's id).
fn opening_arg(conn: &LinkConn) -> String {
    conn.history().map(keys::opening).unwrap_or_else(keys::opening_prefix)
}

/// Epoch milliseconds as the grab script compares them: zero-padded to 15 digits, so string order is
/// time order for every RFC 3339 year (the script never parses a number on an OK grab).
fn script_time(ms: i64) -> String {
    format!("{:015}", ms.max(0))
}

fn split_holding(held: &str) -> Result<(String, u32), GateError> {
    let (order, ticket) = held.split_once(':').ok_or_else(|| GateError::Protocol(format!("buyer entry {held:?}")))?;
    let ticket = ticket.parse().map_err(|_| GateError::Protocol(format!("buyer entry {held:?}")))?;
    Ok((order.to_owned(), ticket))
}

/// Reads the script's one-string reply (`OK:<n>`, `ALREADY:<order>:<n>`, `RATE_LIMITED:<ms>`, ...).
fn parse_grab_reply(reply: &str, order_id: &str, policy: GrabPolicy) -> Result<GrabOutcome, GateError> {
    let bad = || GateError::Protocol(format!("grab reply {reply:?}"));
    let (code, rest) = reply.split_once(':').unwrap_or((reply, ""));
    Ok(match code {
        "OK" => GrabOutcome::Granted {
            order_id: order_id.to_owned(),
            ticket_no: rest.parse().map_err(|_| bad())?,
            // Filled in by the caller, which knows the head it sent.
            message: String::new(),
        },
        "ALREADY" => {
            let (order_id, ticket_no) = split_holding(rest)?;
            GrabOutcome::Already { order_id, ticket_no }
        }
        // Callers' clocks differ slightly: the wait is never more than one window.
        "RATE_LIMITED" => GrabOutcome::RateLimited {
            retry_after_ms: rest.parse::<i64>().map_err(|_| bad())?.clamp(1, policy.rate_window.as_millis() as i64)
                as u64,
        },
        "CANCELLED" if !rest.is_empty() => GrabOutcome::Cancelled { order_id: rest.to_owned() },
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

    #[test]
    fn script_times_sort_as_strings_as_they_do_as_numbers() {
        let times = [0, 999, 1_000, 1_763_900_000_000, 9_999_999_999_999, 10_413_792_000_000, 253_402_300_799_999];
        for pair in times.windows(2) {
            let (a, b) = (script_time(pair[0]), script_time(pair[1]));
            assert_eq!(a.len(), 15);
            assert!(a < b, "{a} < {b}");
        }
    }

    #[test]
    fn every_reply_of_the_script_reads_as_its_outcome() {
        let p = GrabPolicy::default();
        let order = "0199a0b0-0000-7000-8000-000000000001";
        assert_eq!(
            parse_grab_reply("OK:17", order, p).unwrap(),
            GrabOutcome::Granted { order_id: order.into(), ticket_no: 17, message: String::new() }
        );
        assert_eq!(
            parse_grab_reply(&format!("ALREADY:{order}:3"), "other", p).unwrap(),
            GrabOutcome::Already { order_id: order.into(), ticket_no: 3 }
        );
        assert_eq!(
            parse_grab_reply("RATE_LIMITED:250", order, p).unwrap(),
            GrabOutcome::RateLimited { retry_after_ms: 250 }
        );
        assert_eq!(
            parse_grab_reply("RATE_LIMITED:-5", order, p).unwrap(),
            GrabOutcome::RateLimited { retry_after_ms: 1 }
        );
        for code in ["NOT_FOUND", "STALE", "NOT_STARTED", "ENDED", "SOLD_OUT"] {
            assert_eq!(parse_grab_reply(code, order, p).unwrap().code(), code);
        }
        assert_eq!(
            parse_grab_reply(&format!("CANCELLED:{order}"), "other", p).unwrap(),
            GrabOutcome::Cancelled { order_id: order.into() }
        );
        for bad in ["", "OK", "OK:x", "ALREADY:abc", "MAYBE", "RATE_LIMITED:", "CANCELLED"] {
            assert!(parse_grab_reply(bad, order, p).is_err(), "{bad:?} accepted");
        }
    }
}
