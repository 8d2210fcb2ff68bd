//! What the cache says of a sale: the numbers left, the window, who holds what, and the audit's
//! view of it.

use redis::AsyncCommands;

use super::{Gate, GateError, keys, opening_on, split_holding};
use domain::{Buyer, EventId, Holding, OrderId, TicketNo, UserId};

/// The sale window as Redis holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub start_ms: i64,
    pub end_ms: i64,
    /// Holders may cancel, and the waitlist be joined, until then.
    pub cancel_until_ms: i64,
}

impl Window {
    /// Until when the event is live: its sale, then its cancellation window.
    pub fn active_until_ms(&self) -> i64 {
        self.end_ms.max(self.cancel_until_ms)
    }
}

impl Gate {
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
        let mut each = Vec::with_capacity(events.len());
        for e in events {
            each.push(self.buckets(e).await?);
        }
        let mut conn = self.link.conn().await?;
        let Some(history) = conn.history() else {
            // A cluster answers per slot: one bucket at a time, the buckets' nodes in parallel.
            let each = each.iter().map(|buckets| {
                let conn = conn.clone();
                async move {
                    let per_bucket = buckets.iter().map(|b| {
                        let mut conn = conn.clone();
                        async move {
                            let opening = opening_on(&mut conn, b).await?;
                            let (current, left): (bool, u32) = redis::pipe()
                                .hexists(keys::meta(b), &opening)
                                .llen(keys::seats(b))
                                .query_async(&mut conn)
                                .await?;
                            Ok::<_, GateError>(current.then_some(left))
                        }
                    });
                    let counts = futures::future::try_join_all(per_bucket).await?;
                    Ok::<_, GateError>(counts.into_iter().sum::<Option<u32>>())
                }
            });
            return futures::future::try_join_all(each).await;
        };
        let opening = keys::opening(history);
        let mut pipe = redis::pipe();
        for buckets in &each {
            for b in buckets.iter() {
                pipe.hexists(keys::meta(b), &opening).llen(keys::seats(b));
            }
        }
        let flat: Vec<u32> = pipe.query_async(&mut conn).await?;
        let mut pairs = flat.chunks(2);
        Ok(each
            .iter()
            .map(|buckets| {
                // Every bucket cached, or the event reads as not cached.
                (&mut pairs).take(buckets.iter().len()).map(|p| (p[0] == 1).then_some(p[1])).sum::<Option<u32>>()
            })
            .collect())
    }

    /// The sale window, or `None` when the event is not in this server's history's cache (for a
    /// sharded event, when any bucket of it is not: the rebuild that follows lays down the whole).
    pub async fn window(&self, event: &EventId) -> Result<Option<Window>, GateError> {
        let mut conn = self.link.conn().await?;
        let opening = opening_on(&mut conn, event).await?;
        type Fields = (Option<i64>, Option<i64>, Option<i64>, Option<String>);
        let (start, end, cancel_until, current): Fields = redis::cmd("HMGET")
            .arg(keys::meta(event))
            .arg(&["start", "end", "cancel_until", opening.as_str()])
            .query_async(&mut conn)
            .await?;
        let window = match (start, end, cancel_until, current) {
            (Some(start_ms), Some(end_ms), Some(cancel_until_ms), Some(_)) => {
                Window { start_ms, end_ms, cancel_until_ms }
            }
            _ => return Ok(None),
        };
        let buckets = self.buckets(event).await?;
        Ok((!buckets.is_sharded() || self.siblings_cached(&conn, &buckets).await?).then_some(window))
    }

    /// The order a user holds in the cache, as `(order id, ticket number)`. A cache not there in
    /// this history (lost, written before a failover, or gone after the sale) cannot say (the
    /// user's grab may be among what it lost): `GateError::Stale`, and the caller decides from the
    /// event's time whether to rebuild it or trust DynamoDB (`Rebuilder::holding`).
    pub async fn buyer(&self, event: &EventId, user: &UserId) -> Result<Option<Holding>, GateError> {
        let buckets = self.buckets(event).await?;
        let event = buckets.home(user);
        let mut conn = self.link.conn().await?;
        let opening = opening_on(&mut conn, event).await?;
        let (current, field): (Option<String>, Option<String>) = redis::cmd("HMGET")
            .arg(keys::meta(event))
            .arg(&[opening.as_str(), keys::user_field(user).as_str()])
            .query_async(&mut conn)
            .await?;
        if current.is_none() {
            return Err(GateError::Stale);
        }
        Ok(match field {
            Some(f) if !f.starts_with(['#', '!']) => Some(split_holding(&f)?),
            _ => None,
        })
    }

    /// Every holding the cache records (tests, tools and the invariant checks; one `HGETALL` per
    /// bucket).
    pub async fn holdings(&self, event: &EventId) -> Result<Vec<Buyer>, GateError> {
        let mut conn = self.link.conn().await?;
        let mut buyers = Vec::new();
        for b in self.buckets(event).await?.iter() {
            let meta: Vec<(String, String)> = conn.hgetall(keys::meta(b)).await?;
            buyers.extend(buyers_in(meta)?);
        }
        Ok(buyers)
    }

    /// The holdings and the outbox's order ids, read together (one `MULTI` per bucket: a user's
    /// holding and its outbox entry share their home bucket), so an order the consumer stores and
    /// clears meanwhile is in one or the other: reconcile's drift check.
    pub async fn holdings_and_outbox(
        &self,
        event: &EventId,
    ) -> Result<(Vec<Buyer>, std::collections::HashSet<OrderId>), GateError> {
        let mut conn = self.link.conn().await?;
        let (mut buyers, mut in_outbox) = (Vec::new(), std::collections::HashSet::new());
        for b in self.buckets(event).await?.iter() {
            let (meta, outbox): (Vec<(String, String)>, Vec<String>) =
                redis::pipe().atomic().hgetall(keys::meta(b)).hkeys(keys::outbox(b)).query_async(&mut conn).await?;
            buyers.extend(buyers_in(meta)?);
            // Only the scripts write outbox keys, each an order id they were given.
            in_outbox.extend(outbox.iter().filter_map(|key| OrderId::parse(key).ok()));
        }
        Ok((buyers, in_outbox))
    }

    /// What the audit needs of the cache, read in one step per bucket (`MULTI`): the numbers on
    /// sale (a sharded event's numbers moving between buckets among them) and held for the
    /// waitlist, the outbox's orders and the waitlist's length. `None` when the event (any bucket
    /// of it) is not cached in this history. A sharded event's buckets are read one after the
    /// other: a move between two reads can show its numbers twice, so the audit of a sharded sale
    /// is read once its moves are over (after the sale; the audit reads a failing view again).
    pub async fn audit_view(&self, event: &EventId) -> Result<Option<domain::audit::CacheView>, GateError> {
        let mut conn = self.link.conn().await?;
        let mut view = domain::audit::CacheView {
            on_sale: Default::default(),
            returned: Default::default(),
            outbox: Default::default(),
            waiting: 0,
        };
        for b in self.buckets(event).await?.iter() {
            let opening = opening_on(&mut conn, b).await?;
            type View = (bool, Vec<u32>, Vec<u32>, Vec<(String, String)>, u64, Vec<String>);
            let (cached, on_sale, returned, outbox, waiting, moving): View = redis::pipe()
                .atomic()
                .hexists(keys::meta(b), &opening)
                .lrange(keys::seats(b), 0, -1)
                .lrange(keys::returned(b), 0, -1)
                .hgetall(keys::outbox(b))
                .zcard(keys::wait(b))
                .hvals(keys::moving(b))
                .query_async(&mut conn)
                .await?;
            if !cached {
                return Ok(None);
            }
            view.on_sale.extend(on_sale.into_iter().map(TicketNo::new));
            view.on_sale.extend(moving.iter().filter_map(|m| super::moves::Move::parse(m)).flat_map(|m| m.numbers));
            view.returned.extend(returned.into_iter().map(TicketNo::new));
            view.outbox.extend(outbox.into_iter().filter_map(|(order, message)| {
                let order = OrderId::parse(&order).ok()?;
                domain::OrderMessage::parse(&message).ok().map(|m| (order, m.ticket_no))
            }));
            view.waiting += waiting;
        }
        Ok(Some(view))
    }
}

/// The buyers among meta's fields: `=<user>` holding `<order id>:<ticket no>`.
fn buyers_in(meta: Vec<(String, String)>) -> Result<Vec<Buyer>, GateError> {
    let mut buyers = Vec::new();
    for (field, value) in meta {
        let Some(user) = field.strip_prefix('=') else { continue };
        // A counter or a cancellation: no holding.
        if value.starts_with(['#', '!']) {
            continue;
        }
        let Holding { order, ticket_no } = split_holding(&value)?;
        let user = UserId::parse(user).map_err(|e| GateError::Protocol(format!("holding {field:?}: {e}")))?;
        buyers.push(Buyer { user, order, ticket_no });
    }
    Ok(buyers)
}

/// Where the cache itself has each of an event's numbers, and who its users are: what reconcile's
/// look at the whole reads (`Gate::places`), from the cache alone.
#[derive(Debug, Default)]
pub struct Places {
    /// Numbers in no place of the cache: not on sale, moving, held back, held by a user's field, nor
    /// on their way to the line.
    pub lost: Vec<TicketNo>,
    /// Numbers in two places: on sale (or moving, or held back) and held, or held twice.
    pub doubled: Vec<TicketNo>,
    /// No number on sale or moving in any bucket: only then can users wait.
    pub sold_out: bool,
    /// Users whose field holds an order, or a cancelled one: none of them waits.
    pub taken: std::collections::HashSet<UserId>,
    /// Users in the line.
    pub line: std::collections::HashSet<UserId>,
}

impl Gate {
    /// [`Places`] of `event`, bucket by bucket, each bucket read in one step (`MULTI`); `None`
    /// when a bucket is not cached in this history. Numbers on their way between a canceller's home
    /// and the line (a sharded give-back's `giving` and `handed` records) count as placed.
    pub async fn places(&self, event: &EventId, capacity: u32) -> Result<Option<Places>, GateError> {
        let mut conn = self.link.conn().await?;
        let mut count: std::collections::HashMap<TicketNo, u32> = std::collections::HashMap::new();
        let mut transit = std::collections::HashSet::new();
        let mut places = Places { sold_out: true, ..Default::default() };
        for b in self.buckets(event).await?.iter() {
            let opening = opening_on(&mut conn, b).await?;
            type Read =
                (bool, Vec<u32>, Vec<u32>, Vec<String>, Vec<String>, Vec<String>, Vec<(String, String)>, Vec<String>);
            let (cached, seats, returned, moving, giving, handed, meta, line): Read = redis::pipe()
                .atomic()
                .hexists(keys::meta(b), &opening)
                .lrange(keys::seats(b), 0, -1)
                .lrange(keys::returned(b), 0, -1)
                .hvals(keys::moving(b))
                .hvals(keys::giving(b))
                .hvals(keys::handed(b))
                .hgetall(keys::meta(b))
                .zrange(keys::wait(b), 0, -1)
                .query_async(&mut conn)
                .await?;
            if !cached {
                return Ok(None);
            }
            let moving: Vec<TicketNo> =
                moving.iter().filter_map(|m| super::moves::Move::parse(m)).flat_map(|m| m.numbers).collect();
            places.sold_out &= seats.is_empty() && moving.is_empty();
            for n in seats.into_iter().chain(returned).map(TicketNo::new).chain(moving) {
                *count.entry(n).or_default() += 1;
            }
            transit.extend(giving.iter().filter_map(|n| n.parse().ok()).map(TicketNo::new));
            for promoted in handed.iter().filter_map(|m| domain::OrderMessage::parse(m).ok()) {
                transit.insert(promoted.ticket_no);
                places.taken.insert(promoted.user_id);
            }
            for (field, value) in meta {
                let Some(user) = field.strip_prefix('=').and_then(|u| UserId::parse(u).ok()) else { continue };
                if value.starts_with('!') {
                    places.taken.insert(user);
                } else if let Some(held) = keys::parse_holding(&value) {
                    *count.entry(held.ticket_no).or_default() += 1;
                    places.taken.insert(user);
                }
            }
            places.line.extend(line.iter().filter_map(|u| UserId::parse(u).ok()));
        }
        places.lost =
            (1..=capacity).map(TicketNo::new).filter(|n| !count.contains_key(n) && !transit.contains(n)).collect();
        places.doubled = count.into_iter().filter(|(_, c)| *c > 1).map(|(n, _)| n).collect();
        places.doubled.sort_unstable();
        Ok(Some(places))
    }
}
