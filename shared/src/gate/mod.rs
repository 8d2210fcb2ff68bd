//! The Redis gate (ElastiCache): the grab script and the few typed reads and writes around it.
//!
//! Every key of one event carries the hash tag `{<event id>}` so one script touches one cluster
//! slot (DESIGN.md section 6).

use std::sync::LazyLock;

use redis::{AsyncCommands, Value, aio::ConnectionManager};

use crate::{
    config::{GateSettings, GrabPolicy},
    domain::{Event, EventId, OrderId, UserId, event::epoch_ms},
};

/// The grab script, loaded once per execution environment and run with `EVALSHA`; the redis
/// crate loads it again by itself when a server answers `NOSCRIPT` (after a restart or failover).
static GRAB_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(include_str!("grab.lua")));

static UNLOCK_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(include_str!("unlock.lua")));

/// How many ticket numbers one `RPUSH` carries when an event is warmed.
const WARM_CHUNK: u32 = 10_000;

/// The Redis keys of one event.
pub mod keys {
    use crate::domain::{EventId, UserId};

    pub fn meta(e: &EventId) -> String {
        format!("ev:{{{e}}}:meta")
    }
    pub fn seats(e: &EventId) -> String {
        format!("ev:{{{e}}}:seats")
    }
    pub fn buyers(e: &EventId) -> String {
        format!("ev:{{{e}}}:buyers")
    }
    pub fn outbox(e: &EventId) -> String {
        format!("ev:{{{e}}}:outbox")
    }
    pub fn rate(e: &EventId, u: &UserId) -> String {
        format!("ev:{{{e}}}:rl:{u}")
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
}

/// What the grab script decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrabOutcome {
    RateLimited { retry_after_ms: u64 },
    NotFound,
    NotStarted,
    Ended,
    Already { order_id: String, ticket_no: u32 },
    SoldOut,
    Granted { order_id: String, ticket_no: u32, stock_left: u32, message: String },
}

impl GrabOutcome {
    /// The script's own name for the outcome (also the metric and log name).
    pub fn code(&self) -> &'static str {
        match self {
            Self::RateLimited { .. } => "RATE_LIMITED",
            Self::NotFound => "NOT_FOUND",
            Self::NotStarted => "NOT_STARTED",
            Self::Ended => "ENDED",
            Self::Already { .. } => "ALREADY",
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
    /// The order message without `ticket_no`, as a JSON object.
    pub message_without_ticket: &'a str,
}

/// The sale window as Redis holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub start_ms: i64,
    pub end_ms: i64,
    pub closed: bool,
}

#[derive(Clone)]
pub struct Gate {
    conn: ConnectionManager,
}

impl Gate {
    /// Builds the connection manager without connecting: a cold start never fails because Redis is
    /// down; the first command fails fast instead and the caller answers `503 BUSY`.
    pub fn new(settings: &GateSettings) -> Result<Self, GateError> {
        let client = redis::Client::open(settings.redis_url.as_str())?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(settings.connect_timeout))
            .set_response_timeout(Some(settings.command_timeout))
            // One quick reconnect, no retry storm against a server that is down.
            .set_number_of_retries(1)
            .set_max_delay(std::time::Duration::from_millis(100));
        let conn = ConnectionManager::new_lazy_with_config(client, config)?;
        Ok(Self { conn })
    }

    /// The raw connection, for tests and tools that inspect the keys.
    pub fn connection(&self) -> ConnectionManager {
        self.conn.clone()
    }

    pub async fn grab(&self, attempt: &GrabAttempt<'_>, policy: GrabPolicy) -> Result<GrabOutcome, GateError> {
        let e = attempt.event;
        // The script appends `,"ticket_no":n}` to the object's text.
        let head = attempt.message_without_ticket.trim_end();
        let head = head
            .strip_suffix('}')
            .ok_or_else(|| GateError::Protocol("the order message is not a JSON object".into()))?;
        let reply: Vec<Value> = GRAB_SCRIPT
            .key(keys::meta(e))
            .key(keys::seats(e))
            .key(keys::buyers(e))
            .key(keys::outbox(e))
            .key(keys::rate(e, attempt.user))
            .arg(attempt.user.as_str())
            .arg(attempt.order_id.as_str())
            .arg(head)
            .arg(policy.rate_limit)
            .arg(policy.rate_window.as_millis() as u64)
            .invoke_async(&mut self.conn.clone())
            .await?;
        let mut outcome = parse_grab_reply(&reply)?;
        if let GrabOutcome::Granted { ticket_no, message, .. } = &mut outcome {
            *message = outbox_entry(head, *ticket_no);
        }
        Ok(outcome)
    }

    /// Fills the cache for a freshly released event: every ticket number free, no buyer, no
    /// outbox. One `MULTI` so a grab never sees half an event; `meta` goes last because its presence
    /// is what "warmed" means.
    pub async fn warm(&self, event: &Event) -> Result<(), GateError> {
        let mut pipe = redis::pipe();
        pipe.atomic().del(keys::outbox(&event.id)).ignore();
        fill(&mut pipe, event, &Holdings::default());
        pipe.query_async::<()>(&mut self.conn.clone()).await?;
        Ok(())
    }

    /// Rebuilds a lost cache exactly from what DynamoDB holds: buyers from the stored orders, free
    /// numbers = 1..capacity minus the held ones. Under the event's lock, and only while `meta` is
    /// still missing, in one `MULTI`: a concurrent rebuild or grab cannot double anything. The
    /// outbox is left as it is. Returns false when another rebuild holds the lock or the cache is
    /// already there.
    pub async fn rebuild(
        &self,
        event: &Event,
        holdings: &Holdings,
        lock_ttl: std::time::Duration,
    ) -> Result<bool, GateError> {
        let e = &event.id;
        let token = uuid::Uuid::now_v7().to_string();
        let mut conn = self.conn.clone();
        let locked: Option<String> = redis::cmd("SET")
            .arg(keys::rebuild_lock(e))
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(lock_ttl.as_millis() as u64)
            .query_async(&mut conn)
            .await?;
        if locked.is_none() {
            return Ok(false);
        }
        let result = async {
            if conn.exists::<_, bool>(keys::meta(e)).await? {
                return Ok(false);
            }
            let mut pipe = redis::pipe();
            pipe.atomic();
            fill(&mut pipe, event, holdings);
            pipe.del(keys::lost_since(e)).ignore();
            pipe.query_async::<()>(&mut conn).await?;
            Ok(true)
        }
        .await;
        let _: i64 = UNLOCK_SCRIPT.key(keys::rebuild_lock(e)).arg(&token).invoke_async(&mut conn).await?;
        result
    }

    /// Records when the cache was first seen lost and returns that time (epoch ms). The mark
    /// expires by itself; a rebuild removes it.
    pub async fn mark_lost(&self, event: &EventId, now_ms: i64) -> Result<i64, GateError> {
        let mut conn = self.conn.clone();
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

    /// Outbox entries older than `age` on the server's clock, oldest first, at most `limit`.
    pub async fn outbox_due(
        &self,
        event: &EventId,
        age: std::time::Duration,
        limit: usize,
    ) -> Result<Vec<String>, GateError> {
        let mut conn = self.conn.clone();
        let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(&mut conn).await?;
        let cutoff = secs * 1000 + micros / 1000 - age.as_millis() as i64;
        Ok(redis::cmd("ZRANGEBYSCORE")
            .arg(keys::outbox(event))
            .arg("-inf")
            .arg(cutoff)
            .arg("LIMIT")
            .arg(0)
            .arg(limit)
            .query_async(&mut conn)
            .await?)
    }

    pub async fn outbox_len(&self, event: &EventId) -> Result<u64, GateError> {
        Ok(self.conn.clone().zcard(keys::outbox(event)).await?)
    }

    /// Free ticket numbers left, or `None` when the event is not in the cache.
    pub async fn stock(&self, event: &EventId) -> Result<Option<u32>, GateError> {
        let (warmed, left): (bool, u32) = redis::pipe()
            .exists(keys::meta(event))
            .llen(keys::seats(event))
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(warmed.then_some(left))
    }

    /// The live stock of many events in one round trip (`None` where not cached).
    pub async fn stocks(&self, events: &[EventId]) -> Result<Vec<Option<u32>>, GateError> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for e in events {
            pipe.exists(keys::meta(e)).llen(keys::seats(e));
        }
        let flat: Vec<u32> = pipe.query_async(&mut self.conn.clone()).await?;
        Ok(flat.chunks(2).map(|p| (p[0] == 1).then_some(p[1])).collect())
    }

    pub async fn window(&self, event: &EventId) -> Result<Option<Window>, GateError> {
        let (start, end, state): (Option<i64>, Option<i64>, Option<String>) = redis::cmd("HMGET")
            .arg(keys::meta(event))
            .arg(&["start", "end", "state"])
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(match (start, end) {
            (Some(start_ms), Some(end_ms)) => {
                Some(Window { start_ms, end_ms, closed: state.as_deref() == Some("closed") })
            }
            _ => None,
        })
    }

    /// Removes an order's outbox entry once DynamoDB holds the order.
    pub async fn remove_from_outbox(&self, event: &EventId, entry: &str) -> Result<(), GateError> {
        let _: u32 = self.conn.clone().zrem(keys::outbox(event), entry).await?;
        Ok(())
    }

    /// The order a user holds in the cache, as `(order id, ticket number)`.
    pub async fn buyer(&self, event: &EventId, user: &UserId) -> Result<Option<(String, u32)>, GateError> {
        let held: Option<String> = self.conn.clone().hget(keys::buyers(event), user.as_str()).await?;
        held.map(|h| split_holding(&h)).transpose()
    }
}

/// The outbox entry exactly as the script writes it: the message's head with the ticket number
/// spliced in. It is also the SQS body, so the consumer can remove the entry by what it received.
pub fn outbox_entry(head: &str, ticket_no: u32) -> String {
    format!("{head},\"ticket_no\":{ticket_no}}}")
}

/// Who holds what, as DynamoDB says: the input of a rebuild.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holdings {
    /// user id -> (order id, ticket number), for every stored order (rejected ones too, so their
    /// users see their order rather than grab again).
    pub buyers: Vec<(String, String, u32)>,
    /// Ticket numbers held by confirmed orders.
    pub held: std::collections::HashSet<u32>,
}

/// The commands that lay down an event's meta, free numbers and buyers (inside a `MULTI`).
fn fill(pipe: &mut redis::Pipeline, event: &Event, holdings: &Holdings) {
    let e = &event.id;
    pipe.del(keys::seats(e)).ignore().del(keys::buyers(e)).ignore();
    let free: Vec<u32> = (1..=event.capacity).filter(|n| !holdings.held.contains(n)).collect();
    for chunk in free.chunks(WARM_CHUNK as usize) {
        pipe.rpush(keys::seats(e), chunk).ignore();
    }
    for chunk in holdings.buyers.chunks(WARM_CHUNK as usize) {
        let entries: Vec<(&str, String)> = chunk.iter().map(|(u, o, t)| (u.as_str(), format!("{o}:{t}"))).collect();
        pipe.hset_multiple(keys::buyers(e), &entries).ignore();
    }
    pipe.hset_multiple(
        keys::meta(e),
        &[
            ("capacity", event.capacity.to_string()),
            ("start", epoch_ms(event.sale_start).to_string()),
            ("end", epoch_ms(event.sale_end).to_string()),
            ("state", "open".to_owned()),
        ],
    )
    .ignore();
}

fn split_holding(held: &str) -> Result<(String, u32), GateError> {
    let (order, ticket) = held.split_once(':').ok_or_else(|| GateError::Protocol(format!("buyer entry {held:?}")))?;
    let ticket = ticket.parse().map_err(|_| GateError::Protocol(format!("buyer entry {held:?}")))?;
    Ok((order.to_owned(), ticket))
}

fn parse_grab_reply(reply: &[Value]) -> Result<GrabOutcome, GateError> {
    let text = |i: usize| -> Result<String, GateError> {
        match reply.get(i) {
            Some(Value::BulkString(b)) => String::from_utf8(b.clone()).map_err(|e| GateError::Protocol(e.to_string())),
            Some(Value::SimpleString(s)) => Ok(s.clone()),
            other => Err(GateError::Protocol(format!("field {i}: {other:?}"))),
        }
    };
    let int = |i: usize| -> Result<i64, GateError> {
        match reply.get(i) {
            Some(Value::Int(n)) => Ok(*n),
            other => Err(GateError::Protocol(format!("field {i}: {other:?}"))),
        }
    };
    let small = |i: usize| -> Result<u32, GateError> {
        int(i).and_then(|n| u32::try_from(n).map_err(|_| GateError::Protocol(format!("field {i}: {n}"))))
    };
    Ok(match text(0)?.as_str() {
        "RATE_LIMITED" => GrabOutcome::RateLimited { retry_after_ms: int(1)?.max(0) as u64 },
        "NOT_FOUND" => GrabOutcome::NotFound,
        "NOT_STARTED" => GrabOutcome::NotStarted,
        "ENDED" => GrabOutcome::Ended,
        "SOLD_OUT" => GrabOutcome::SoldOut,
        "ALREADY" => GrabOutcome::Already { order_id: text(1)?, ticket_no: small(2)? },
        // The message is filled in by the caller, which knows the head it sent.
        "OK" => GrabOutcome::Granted {
            order_id: text(1)?,
            ticket_no: small(2)?,
            stock_left: small(3)?,
            message: String::new(),
        },
        other => return Err(GateError::Protocol(format!("unknown outcome {other:?}"))),
    })
}
