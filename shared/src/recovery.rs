//! Rebuilding a lost cache (ElastiCache failover, restart, `FLUSHALL`) exactly from DynamoDB.
//! A cache written before a failover counts as lost (`gate::link`): the promoted replica may lack
//! the old primary's last writes, so it is rebuilt the same way.
//!
//! DynamoDB is complete only once the orders still in flight on the queue are stored, so a rebuild
//! waits for the queue to drain (answering "busy" meanwhile), for at most `max_wait` after the loss
//! was first seen; past that it proceeds, and DynamoDB's conditions still turn any clash with a
//! late order into a `REJECTED` order, never an oversold ticket.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
    time::{Duration, Instant},
};

use time::OffsetDateTime;

use crate::{
    domain::{
        Buyer, Event, EventId, Holding, Holdings, OrderId, OrderMessage, TicketNo, UserId, Waiter,
        event::{epoch_ms, rfc3339},
        order::WaitHead,
    },
    gate::{Gate, GateError, LaidDown, RebuildLock},
    queue::{OrderQueue, QueueError},
    store::{EventBook, Store, StoreError, cancellations::GiveBackDue},
};

pub use crate::config::RebuildSettings;

#[derive(Debug, thiserror::Error)]
pub enum RecoveryError {
    #[error(transparent)]
    Gate(#[from] GateError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Queue(#[from] QueueError),
    #[error("the queue's depth was not read within {0:?}")]
    QueueSlow(Duration),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rebuild {
    /// The cache was rebuilt now.
    Done,
    /// The cache is there (someone else rebuilt it, or it was never lost).
    Present,
    /// Another rebuild holds the lock, or orders are still in flight: ask again shortly.
    Busy,
    /// The sale and its cancellation window are over: nothing needs its cache, so nobody can make
    /// the system rebuild one.
    Ended,
}

/// How often one event's cache may be repaired (`Rebuilder::repair`).
pub const REPAIR_EVERY: Duration = Duration::from_secs(10);

/// How long a reading of the queue's depth stands: while a cache is lost every request asks for a
/// rebuild, and one reading serves them all instead of one queue call each.
const DEPTH_READ_EVERY: Duration = Duration::from_millis(250);
/// How long one reading may take before the rebuild answers "busy" instead.
const DEPTH_READ_LIMIT: Duration = Duration::from_secs(1);
pub use crate::store::MISS_KEPT;

#[derive(Clone)]
pub struct Rebuilder {
    store: Store,
    gate: Gate,
    queue: OrderQueue,
    settings: RebuildSettings,
    /// The last reading of the queue's depth; held while a reading is taken, so a burst takes one.
    depth: Arc<tokio::sync::Mutex<Option<(Instant, u64)>>>,
    events: EventBook,
}

impl Rebuilder {
    pub fn new(store: Store, gate: Gate, queue: OrderQueue, settings: RebuildSettings) -> Self {
        Self { events: EventBook::new(store.clone()), store, gate, queue, settings, depth: Arc::default() }
    }

    /// A released event, remembered once read (a lost cache makes every request of the sale ask
    /// for its event until the rebuild); `None` for an event DynamoDB does not know, remembered
    /// briefly ([`EventBook`]).
    pub async fn event(&self, id: &EventId) -> Result<Option<Event>, RecoveryError> {
        Ok(self.events.get(id).await?)
    }

    /// What `user` holds in the event's cache (an order not yet stored in DynamoDB reads
    /// `PENDING` from it). A cache lost while the sale or its cancellations run is rebuilt first
    /// (`Busy` while it cannot be yet: the caller answers 503, never "no order"); after that, a
    /// cache gone is one that expired, and what DynamoDB holds is all there is (`None`).
    pub async fn holding(&self, event: &Event, user: &UserId) -> Result<Option<Holding>, HoldingUnknown> {
        for _ in 0..2 {
            match self.gate.buyer(&event.id, user).await {
                Ok(held) => return Ok(held),
                Err(GateError::Stale) => match self.rebuild(event).await.map_err(|_| HoldingUnknown)? {
                    Rebuild::Done | Rebuild::Present => continue,
                    Rebuild::Busy => return Err(HoldingUnknown),
                    Rebuild::Ended => return Ok(None),
                },
                Err(e) => {
                    tracing::warn!(event_id = %event.id, error = %e, "the cache could not say what the user holds");
                    return Err(HoldingUnknown);
                }
            }
        }
        Err(HoldingUnknown)
    }

    /// The shared queue's depth (every sale's messages, approximate), as last read (at most
    /// every `DEPTH_READ_EVERY`): what the organiser sees beside an event's own orders on their way.
    pub async fn queue_depth(&self) -> Option<u64> {
        self.in_flight().await.ok()
    }

    /// The orders queue's name.
    pub fn queue_name(&self) -> &str {
        self.queue.name()
    }

    async fn in_flight(&self) -> Result<u64, RecoveryError> {
        let mut depth = self.depth.lock().await;
        if let Some((read_at, n)) = *depth
            && read_at.elapsed() < DEPTH_READ_EVERY
        {
            return Ok(n);
        }
        // Bounded: the others wait on this reading, and one stalled call must not hold them all.
        let n = tokio::time::timeout(DEPTH_READ_LIMIT, self.queue.in_flight())
            .await
            .map_err(|_| RecoveryError::QueueSlow(DEPTH_READ_LIMIT))??;
        *depth = Some((Instant::now(), n));
        Ok(n)
    }

    /// Rebuilds the event's cache if it is lost (docs/DESIGN.md section 10).
    pub async fn rebuild(&self, event: &Event) -> Result<Rebuild, RecoveryError> {
        self.rebuild_until(event, None).await
    }

    /// The rebuild, stopped after `halt` as a process killed there would leave it: the lock kept
    /// (until it expires), nothing after that step done. Tests stop it between each pair of steps.
    #[doc(hidden)]
    pub async fn rebuild_until(&self, event: &Event, halt: Option<RebuildStep>) -> Result<Rebuild, RecoveryError> {
        self.run(event, halt, None).await
    }

    /// The exact rebuild of a cache that is there but found to have lost part of itself (a key of
    /// it gone, or a line that lacks a durable place): laid down again from DynamoDB, the outboxes
    /// and the sent records as a lost one is. At most once per [`REPAIR_EVERY`] per event (later
    /// asks answer `Present`): a fault a repair does not mend must not stop the sale again and
    /// again. `why` is logged.
    pub async fn repair(&self, event: &Event, why: &str) -> Result<Rebuild, RecoveryError> {
        if !self.gate.may_repair(&event.id, REPAIR_EVERY).await? {
            tracing::warn!(event_id = %event.id, why, "the cache needs repair, repaired within the last seconds already");
            return Ok(Rebuild::Present);
        }
        tracing::warn!(event_id = %event.id, why, "the cache is repaired: laid down again from DynamoDB");
        self.run(event, None, Some(why)).await
    }

    async fn run(
        &self,
        event: &Event,
        halt: Option<RebuildStep>,
        repair: Option<&str>,
    ) -> Result<Rebuild, RecoveryError> {
        // After the sale, the cache serves cancellations until their window closes.
        if OffsetDateTime::now_utc() >= event.active_until() {
            return Ok(Rebuild::Ended);
        }
        if repair.is_none() && self.gate.window(&event.id).await?.is_some() {
            return Ok(Rebuild::Present);
        }
        let Some(lock) = self.gate.lock_rebuild(&event.id, self.settings.lock_ttl).await? else {
            // Another rebuild is under way (or just finished).
            return Ok(if self.gate.window(&event.id).await?.is_some() { Rebuild::Present } else { Rebuild::Busy });
        };
        let rebuilt = self.rebuild_locked(event, &lock, halt, repair.is_some()).await;
        if matches!(rebuilt, Ok(Step::Halted)) {
            return Ok(Rebuild::Busy);
        }
        self.gate.unlock_rebuild(lock).await?;
        Ok(match rebuilt? {
            Step::Done => Rebuild::Done,
            Step::Present => Rebuild::Present,
            Step::Wait | Step::Halted => Rebuild::Busy,
        })
    }

    /// The rebuild under its lock, in the order docs/DESIGN.md section 10 gives: every bucket stops
    /// deciding first, then what is under way settles, then the outboxes and DynamoDB are read (the
    /// snapshot: nothing can decide any more), then the rebuild is recorded, then each bucket is
    /// laid down and opened, bucket 0 last, each only while this rebuild's stop still holds it.
    async fn rebuild_locked(
        &self,
        event: &Event,
        lock: &RebuildLock,
        halt: Option<RebuildStep>,
        repair: bool,
    ) -> Result<Step, RecoveryError> {
        let halts = |step: RebuildStep| halt == Some(step);
        // A rebuild that held the lock just before may have finished: no DynamoDB reads then.
        if !repair && self.gate.window(&event.id).await?.is_some() {
            return Ok(Step::Present);
        }
        let buckets = self.gate.buckets_of(event);
        // A cache an older release laid out lost nothing: it is rebuilt at once, its waitlist kept.
        let outdated = self.gate.layout_outdated(&event.id).await?;
        // 1. Every bucket stops deciding: from here no script grants, gives back or promotes, so
        //    what is read next is all there will be. Then every sent record stops taking orders: an
        //    order decided before the stop is sent only once its record holds it, so from here what
        //    a record holds is every order of its bucket that may be on the queue. Neither lets the
        //    consumer remove an entry any more (`let_out.lua`).
        let stopped = self.gate.stop(&buckets, lock).await?;
        let Some(recorded) = self.gate.stop_sent(&buckets, lock).await? else { return Ok(Step::Wait) };
        if halts(RebuildStep::Stopped) {
            return Ok(Step::Halted);
        }
        // 2. Settle: an order stored before the stops (its entries then removed) shows in
        //    DynamoDB's index before the read (`index_lag`); in the fallback below, grab's sends
        //    under way also reach the queue (`settle`). Then, only where a bucket was lost with its
        //    sent record (its shard lost as well, or a cache laid down before sent records), the
        //    queue drains into DynamoDB, as far as its approximate depth tells.
        let known = stopped.iter().zip(&recorded).all(|(stopped, recorded)| stopped.intact() || *recorded);
        let proof = if outdated {
            Proof::Intact
        } else {
            let now = epoch_ms(OffsetDateTime::now_utc());
            // A bucket deciding until this stop restarts the wait: its last orders may have been
            // stored (their outbox entries removed) a moment ago.
            let again = stopped.contains(&crate::gate::Stopped::Live);
            let lost_since = self.gate.mark_lost(&event.id, now, again).await?;
            let waited = Duration::from_millis((now - lost_since).max(0) as u64);
            let settle =
                if known { self.settings.index_lag } else { self.settings.settle.max(self.settings.index_lag) };
            if waited < settle {
                return Ok(Step::Wait);
            }
            if known {
                Proof::SentRecords
            } else {
                let in_flight = match self.in_flight().await {
                    Ok(n) => Some(n),
                    // Past the longest wait the rebuild goes on; an unknown depth is recorded as such.
                    Err(e) if waited >= self.settings.max_wait => {
                        tracing::warn!(event_id = %event.id, error = %e, "the queue's depth is unknown; the rebuild goes on");
                        None
                    }
                    Err(e) => return Err(e),
                };
                if in_flight != Some(0) && waited < self.settings.max_wait {
                    tracing::info!(event_id = %event.id, in_flight, waited_ms = waited.as_millis() as u64, "rebuild waits for in-flight orders");
                    return Ok(Step::Wait);
                }
                Proof::Queue { in_flight }
            }
        };
        // 3. The snapshot: the outboxes and the sent records first, then DynamoDB. The consumer
        //    removes an entry only once DynamoDB holds its order, so an order is in one or the
        //    other, or both.
        let read_at = OffsetDateTime::now_utc();
        let outbox = self.gate.outbox_of(&buckets).await?;
        // Every record laid down is read; one that is not as this rebuild stopped it (lost or
        // stopped by another since) sends the rebuild back to its start.
        let Some(sent) = self.gate.sent_of(&buckets, &recorded, lock).await? else { return Ok(Step::Wait) };
        if halts(RebuildStep::OutboxesRead) {
            return Ok(Step::Halted);
        }
        let mut holdings = self.store.holdings(&event.id).await?;
        // The index lags the table: an order cancelled a moment ago may still read as holding its
        // number there while an order on its way (in an outbox or a sent record) holds it now.
        // Each such holder is read again from the table itself before that order is given up.
        for doubted in doubted_holders(outbox.iter().chain(&sent), &holdings) {
            if let Some(now) = self.store.get_order_now(&event.id, &doubted.user).await? {
                release_cancelled(&mut holdings, &doubted, &now);
            }
        }
        let undelivered = add_undelivered(outbox, sent, &mut holdings);
        if outdated {
            // The older layout kept its waitlist only in Redis: it becomes durable first.
            for waiter in self.gate.older_waitlist(&event.id).await? {
                self.store.add_waiter(&event.id, &waiter, read_at).await?;
            }
        }
        let dues = self.store.give_backs_due(&event.id).await?;
        let waiters = self.store.waiters(&event.id).await?;
        reserve(&mut holdings, &dues, waiters, event, read_at);
        if halts(RebuildStep::StoreRead) {
            return Ok(Step::Halted);
        }
        // 4. Recorded before anything is laid down: the audit names the rebuilds that read while
        //    orders may still have been on the queue.
        if let Proof::Queue { in_flight } = proof
            && in_flight != Some(0)
        {
            tracing::warn!(event_id = %event.id, ?in_flight, "rebuild stopped waiting for the queue: late orders may be REJECTED");
        }
        self.store.record_rebuild(&event.id, lock.token(), read_at, proof.in_flight(), holdings.promoted_free).await?;
        if halts(RebuildStep::Recorded) {
            return Ok(Step::Halted);
        }
        // 5. Laid down and opened, bucket by bucket.
        let stop_after = match halt {
            Some(RebuildStep::Laid(n)) => Some(n),
            _ => None,
        };
        let laid = self.gate.lay_down(lock, event, &buckets, &holdings, &undelivered, stop_after).await?;
        match laid {
            LaidDown::Open => {}
            LaidDown::Halted => return Ok(Step::Halted),
            // Another rebuild stopped a bucket after this one did: its lay-down, not this one's.
            LaidDown::Fenced => return Ok(Step::Wait),
        }
        tracing::warn!(
            event_id = %event.id,
            buyers = holdings.buyers.len(),
            held = holdings.held.len(),
            returned = holdings.returned.len(),
            waiting = holdings.waiting.len(),
            promoted = holdings.promotions.len(),
            restored = holdings.restored.len(),
            proof = proof.name(),
            "cache rebuilt from DynamoDB"
        );
        Ok(Step::Done)
    }
}

/// The cache could not say what a user holds, and cannot be rebuilt yet: answer busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HoldingUnknown;

/// The steps of the exact rebuild a test may stop after (`Rebuilder::rebuild_until`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RebuildStep {
    /// Every bucket stopped deciding.
    Stopped,
    /// The outboxes read.
    OutboxesRead,
    /// DynamoDB read: the orders, the give-back markers, the waiting places.
    StoreRead,
    /// The rebuild recorded (`REBUILD#`).
    Recorded,
    /// This many buckets laid down and opened (bucket 0 is the last).
    Laid(u16),
}

/// How far one run of the rebuild went.
enum Step {
    Done,
    Present,
    /// Not yet: what is under way settles first, or another rebuild fenced this one off.
    Wait,
    /// Stopped by a test after a step.
    Halted,
}

/// Stored orders that hold a number an order on its way (`entries`) holds too: as the index
/// says, which may not yet show a cancellation.
fn doubted_holders<'a>(entries: impl Iterator<Item = &'a crate::gate::OutboxEntry>, h: &Holdings) -> Vec<Buyer> {
    let claimed: HashMap<TicketNo, OrderId> =
        entries.filter_map(|e| OrderMessage::parse(&e.message).ok()).map(|m| (m.ticket_no, m.order_id)).collect();
    h.buyers
        .iter()
        .filter(|b| h.held.contains(&b.ticket_no) && claimed.get(&b.ticket_no).is_some_and(|o| *o != b.order))
        .cloned()
        .collect()
}

/// A doubted holder (`doubted_holders`) as the table says it is `now`: cancelled, its number is
/// no longer held by it, and its user is one who cancelled.
fn release_cancelled(h: &mut Holdings, doubted: &Buyer, now: &crate::domain::order::OrderView) {
    if now.order_id != doubted.order || now.status != crate::domain::OrderStatus::Cancelled {
        return;
    }
    h.buyers.retain(|b| b.order != doubted.order);
    h.held.remove(&doubted.ticket_no);
    let at_ms = now
        .cancelled_at
        .as_deref()
        .and_then(|at| OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339).ok())
        .map_or(0, epoch_ms);
    h.cancelled.push(crate::domain::Cancelled {
        user: doubted.user.clone(),
        order: doubted.order.clone(),
        ticket_no: doubted.ticket_no,
        at_ms,
        give_back_pending: false,
    });
}

/// Orders that survived in an outbox or a sent record (the cache was lost in part, or the send
/// failed and the queue has drained without them) hold their users and numbers too: DynamoDB does
/// not have them yet, reconcile will deliver them. Those found only in a sent record go back to
/// their bucket's outbox. Returns every order taken: the sent records are laid down with them.
fn add_undelivered(
    outbox: Vec<crate::gate::OutboxEntry>,
    sent: Vec<crate::gate::OutboxEntry>,
    holdings: &mut Holdings,
) -> Vec<crate::gate::OutboxEntry> {
    // Users DynamoDB has an order of, in any state: a sent record keeps an entry until its order is
    // stored and the record open again, so an entry of a stored (even cancelled) order is no
    // order on its way.
    let mut users: HashSet<UserId> = holdings
        .buyers
        .iter()
        .map(|b| b.user.clone())
        .chain(holdings.cancelled.iter().map(|c| c.user.clone()))
        .collect();
    let in_outbox: HashSet<OrderId> = outbox.iter().map(|e| e.order_id.clone()).collect();
    let only_sent = sent.into_iter().filter(|e| !in_outbox.contains(&e.order_id));
    let mut taken = Vec::new();
    for entry in outbox.into_iter().chain(only_sent) {
        let Ok(message) = OrderMessage::parse(&entry.message) else { continue };
        let (user, order) = (message.user_id, message.order_id);
        // A number already held by a stored order stays with it; DynamoDB rejects the other.
        if users.contains(&user) || !holdings.held.insert(message.ticket_no) {
            continue;
        }
        users.insert(user.clone());
        if !in_outbox.contains(&entry.order_id) {
            holdings.restored.push((entry.order_id.clone(), entry.message.clone()));
        }
        holdings.buyers.push(Buyer { user, order, ticket_no: message.ticket_no });
        taken.push(entry);
    }
    taken
}

/// How a rebuild knew every order that may still be on the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proof {
    /// Nothing was lost: an older layout's cache, read whole.
    Intact,
    /// Every bucket's sent record was there, holding every order that may be on the queue.
    SentRecords,
    /// A sent record was lost too: the queue's depth, as SQS approximates it (`in_flight` still on
    /// it when the rebuild read: more than 0 only when it stopped waiting; `None`: unread).
    Queue { in_flight: Option<u64> },
}

impl Proof {
    fn name(self) -> &'static str {
        match self {
            Self::Intact => "intact",
            Self::SentRecords => "sent records",
            Self::Queue { in_flight: Some(0) } => "queue drained",
            Self::Queue { .. } => "queue not drained",
        }
    }

    /// What the rebuild's record says was still on the queue: nothing, when the sent records or
    /// the intact cache held every order on its way.
    fn in_flight(self) -> Option<u64> {
        match self {
            Self::Intact | Self::SentRecords => Some(0),
            Self::Queue { in_flight } => in_flight,
        }
    }
}

/// Completes what the stored orders say with what is on its way: a number whose give-back has not
/// run yet stays with its cancelled order (the give-back runs on the rebuilt cache); a free number
/// last cancelled at or after the sale's end is held for the waitlist, not put on sale; the
/// waitlist is every durable place whose user holds nothing; and a held number found with users
/// waiting goes to the first of them at once.
fn reserve(h: &mut Holdings, dues: &[GiveBackDue], waiters: Vec<Waiter>, event: &Event, now: OffsetDateTime) {
    let during_sale = now < event.sale_end;
    let now = &rfc3339(now);
    let due: HashSet<&OrderId> = dues.iter().map(|d| &d.order_id).collect();
    for c in &mut h.cancelled {
        if due.contains(&c.order) && h.held.insert(c.ticket_no) {
            c.give_back_pending = true;
        }
    }
    let mut last_cancelled: HashMap<TicketNo, i64> = HashMap::new();
    for c in h.cancelled.iter().filter(|c| !c.give_back_pending) {
        let at = last_cancelled.entry(c.ticket_no).or_insert(c.at_ms);
        *at = (*at).max(c.at_ms);
    }
    // A ballot's sale never opens: every number given back is held for the waitlist.
    let sale_end =
        if event.sale_mode == crate::domain::sale_mode::SaleMode::Ballot { i64::MIN } else { epoch_ms(event.sale_end) };
    h.returned =
        last_cancelled.into_iter().filter(|&(n, at)| at >= sale_end && !h.held.contains(&n)).map(|(n, _)| n).collect();
    let taken: HashSet<&UserId> = h.buyers.iter().map(|b| &b.user).chain(h.cancelled.iter().map(|c| &c.user)).collect();
    let mut waiting: std::collections::VecDeque<Waiter> =
        waiters.into_iter().filter(|w| !taken.contains(&w.user)).collect();
    // During the sale users wait only once nothing is on sale, so a free number found beside them
    // was one the cache lost (its key gone, and the crowd told it was sold out): it goes to the
    // line first, in place order, as a given-back one does. Not at a ballot, whose numbers its
    // draw hands out, nor after the sale (numbers left unsold then stay so; only given-back ones
    // reach the line).
    let ballot = event.sale_mode == crate::domain::sale_mode::SaleMode::Ballot;
    let mut free: std::collections::BTreeSet<TicketNo> = if during_sale && !ballot {
        (1..=event.capacity).map(TicketNo::new).filter(|n| !h.held.contains(n) && !h.returned.contains(n)).collect()
    } else {
        Default::default()
    };
    while !waiting.is_empty()
        && let Some(n) = h.returned.pop_first().or_else(|| free.pop_first().inspect(|_| h.promoted_free += 1))
    {
        let w = waiting.pop_front().expect("not empty");
        let order = OrderId::generate();
        let message = WaitHead::new(&event.id, &w.user, &w.email).complete(&WaitHead::tail(&order, now), n);
        h.held.insert(n);
        h.buyers.push(Buyer { user: w.user, order: order.clone(), ticket_no: n });
        h.promotions.push((order, message));
    }
    h.waiting = waiting.into();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Cancelled, Email, EventDraft};

    /// An order cancelled, its number given back and granted again, then a rebuild whose index
    /// still shows the cancelled order holding it: read again, the cancelled one lets the number go
    /// to the order on its way, whose user keeps it.
    #[test]
    fn a_cancellation_the_index_does_not_show_yet_does_not_cost_the_next_holder_their_order() {
        let ev = EventId::parse("lecture-9").unwrap();
        let (ada, bob) = (UserId::parse("ada").unwrap(), UserId::parse("bob").unwrap());
        let (first, next) = (OrderId::generate(), OrderId::generate());
        let n = TicketNo::new(3);
        let message = crate::domain::order::MessageHead::new(
            &next,
            &ev,
            &bob,
            &Email::parse("bob@example.com").unwrap(),
            "2026-11-25T10:00:01Z",
        )
        .complete(n);
        let on_its_way = vec![crate::gate::OutboxEntry { order_id: next.clone(), message }];
        let stale = || Holdings {
            buyers: vec![Buyer { user: ada.clone(), order: first.clone(), ticket_no: n }],
            held: [n].into(),
            ..Holdings::default()
        };
        // As the index says, the number stays with the cancelled order and bob's is given up.
        let mut as_indexed = stale();
        assert!(add_undelivered(on_its_way.clone(), vec![], &mut as_indexed).is_empty());
        // Read again from the table: cancelled.
        let mut h = stale();
        let doubted = doubted_holders(on_its_way.iter(), &h);
        assert_eq!(doubted.len(), 1);
        let now = crate::domain::order::OrderView {
            order_id: first.clone(),
            event_id: ev.clone(),
            ticket_no: n,
            status: crate::domain::OrderStatus::Cancelled,
            reason: None,
            checked_in_at: None,
            cancelled_at: Some("2026-11-25T10:00:00Z".into()),
            amount: None,
        };
        release_cancelled(&mut h, &doubted[0], &now);
        let taken = add_undelivered(on_its_way, vec![], &mut h);
        assert_eq!(taken.len(), 1, "bob's order keeps the number");
        assert!(h.buyers.iter().any(|b| b.user == bob && b.ticket_no == n));
        assert!(h.cancelled.iter().any(|c| c.user == ada), "ada cancelled: no second ticket");
        // A holder the table says still confirmed keeps the number.
        let mut h = stale();
        release_cancelled(
            &mut h,
            &doubted[0],
            &crate::domain::order::OrderView { status: crate::domain::OrderStatus::Confirmed, ..now },
        );
        assert!(add_undelivered(vec![], vec![], &mut h).is_empty() && h.held.contains(&n));
    }

    fn event() -> Event {
        let draft = EventDraft::from_json(&serde_json::json!({
            "id": "lecture-9", "title": "t", "capacity": 10,
            "sale_start": "2026-11-25T10:00:00Z", "sale_end": "2026-11-25T11:00:00Z",
            "cancel_until": "2026-11-25T12:00:00Z"
        }))
        .unwrap();
        draft
            .into_event(
                OffsetDateTime::parse("2026-11-25T09:00:00Z", &time::format_description::well_known::Rfc3339).unwrap(),
            )
            .unwrap()
    }

    fn user(u: &str) -> UserId {
        UserId::parse(u).unwrap()
    }

    fn cancelled(u: &str, n: u32, at: &str) -> Cancelled {
        let at = OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339).unwrap();
        Cancelled {
            user: user(u),
            order: OrderId::generate(),
            ticket_no: TicketNo::new(n),
            at_ms: epoch_ms(at),
            give_back_pending: false,
        }
    }

    fn at(t: &str) -> OffsetDateTime {
        OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).unwrap()
    }

    fn waiter(u: &str, place: u64) -> Waiter {
        Waiter { user: user(u), email: Email::parse(&format!("{u}@example.org")).unwrap(), place }
    }

    #[test]
    fn a_rebuild_keeps_every_returned_number_for_the_waitlist() {
        let mut h = Holdings::default();
        h.held.insert(TicketNo::new(1));
        h.buyers.push(Buyer { user: user("a"), order: OrderId::generate(), ticket_no: TicketNo::new(1) });
        // 2: cancelled during the sale, given back: on sale again. 3: cancelled after the end,
        // given back: held for the waitlist. 4: cancelled after the end, its give-back pending.
        h.cancelled.push(cancelled("b", 2, "2026-11-25T10:30:00Z"));
        h.cancelled.push(cancelled("c", 3, "2026-11-25T11:10:00Z"));
        h.cancelled.push(cancelled("d", 4, "2026-11-25T11:20:00Z"));
        let due = GiveBackDue {
            user: user("d"),
            order_id: h.cancelled[2].order.clone(),
            ticket_no: TicketNo::new(4),
            cancelled_at: OffsetDateTime::now_utc(),
        };
        let mut plain = h.clone();
        reserve(&mut plain, std::slice::from_ref(&due), vec![waiter("a", 1)], &event(), at("2026-11-25T11:30:00Z"));
        assert!(
            plain.cancelled[2].give_back_pending && plain.held.contains(&TicketNo::new(4)),
            "the pending give-back keeps its number"
        );
        assert_eq!(plain.returned.iter().copied().collect::<Vec<_>>(), vec![TicketNo::new(3)]);
        assert!(plain.waiting.is_empty(), "a holder is not waiting");
        assert!(plain.promotions.is_empty());

        // A returned number and a waiting user together: the first waiter gets it.
        reserve(
            &mut h,
            &[due],
            vec![waiter("w2", 7), waiter("w1", 5)].into_iter().rev().collect(),
            &event(),
            at("2026-11-25T11:30:00Z"),
        );
        assert!(h.returned.is_empty());
        assert_eq!(h.promotions.len(), 1);
        let m = OrderMessage::parse(&h.promotions[0].1).unwrap();
        assert_eq!((m.user_id.as_str(), m.ticket_no, m.promoted), ("w1", TicketNo::new(3), true));
        assert_eq!(h.waiting.iter().map(|w| w.user.as_str()).collect::<Vec<_>>(), vec!["w2"]);
    }

    #[test]
    fn during_the_sale_a_free_number_found_beside_waiting_users_goes_to_the_first_of_them() {
        // Numbers 1-8 held; 9 and 10 free (a lost list of free numbers), and three wait.
        let mut h = Holdings::default();
        for n in 1..=8 {
            h.held.insert(TicketNo::new(n));
            h.buyers.push(Buyer {
                user: user(&format!("b{n}")),
                order: OrderId::generate(),
                ticket_no: TicketNo::new(n),
            });
        }
        let waiters = vec![waiter("w1", 1), waiter("w2", 2), waiter("w3", 3)];
        reserve(&mut h, &[], waiters.clone(), &event(), at("2026-11-25T10:30:00Z"));
        let promoted: Vec<(String, u32)> = h
            .promotions
            .iter()
            .map(|(_, m)| OrderMessage::parse(m).unwrap())
            .map(|m| (m.user_id.to_string(), m.ticket_no.get()))
            .collect();
        assert_eq!(promoted, [("w1".to_owned(), 9), ("w2".to_owned(), 10)]);
        assert_eq!(h.waiting.iter().map(|w| w.user.as_str()).collect::<Vec<_>>(), vec!["w3"]);
        // After the sale, numbers left unsold stay so: only given-back ones reach the line.
        let mut after = Holdings::default();
        reserve(&mut after, &[], waiters, &event(), at("2026-11-25T11:30:00Z"));
        assert!(after.promotions.is_empty());
    }
}
