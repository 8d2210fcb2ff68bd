//! reconcile, every minute: re-drives the outbox, rebuilds lost caches, gives back the numbers of
//! cancellations a crash interrupted, measures the drift between Redis and DynamoDB, refreshes the
//! `remaining` snapshots (docs/DESIGN.md section 10). Each step is idempotent; a run that fails part-way is simply
//! followed by the next one.

use serde::Serialize;
use time::OffsetDateTime;

use crate::{
    config::QueueSettings,
    delivery::Courier,
    domain::{ClosedNotice, OrderMessage, order_seal::SealKey},
    fleet::{Converged, Fleet},
    gate::{Gate, GaveBack},
    give_back::GiveBacks,
    queue::{DeadLetters, OrderQueue},
    recovery::{Rebuild, RebuildSettings, Rebuilder},
    secrets::StagedSecret,
    setup::Adapters,
    store::{Store, StoredEvent},
};

/// Events whose sale and cancellation window ended longer ago than this are left alone (their
/// cache has expired).
const QUIET_AFTER_END: time::Duration = time::Duration::seconds(crate::gate::CACHE_AFTER_END.as_secs() as i64);
/// Outbox entries handled per event per run.
const OUTBOX_BATCH: usize = 1_000;
/// How long one run holds its lease at most: the function's timeout (template.yaml), so a run that
/// died frees it by then.
pub const RUN_LEASE: std::time::Duration = std::time::Duration::from_secs(60);
/// How long a run asked for by hand waits for the one under way.
const RUN_WAIT: std::time::Duration = std::time::Duration::from_secs(20);

pub use crate::config::ReconcileSettings;

/// Why one event's pass failed (logged; the next run tries again).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error(transparent)]
    Gate(#[from] crate::gate::GateError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Queue(#[from] crate::queue::QueueError),
    #[error(transparent)]
    Recovery(#[from] crate::recovery::RecoveryError),
    #[error(transparent)]
    GiveBack(#[from] crate::give_back::GiveBackError),
    #[error("an outbox entry names a bad user: {0}")]
    BadEntry(crate::domain::InvalidId),
    #[error("no dead-letter queue is configured (DEAD_LETTERS_QUEUE_URL)")]
    NoDeadLetters,
}

/// What started a run: the EventBridge schedule, or an admin's invoke with `{}`; or an operator's
/// `{"redrive": "dead-letters"}`, which moves the DLQ's messages back to the orders queue and does
/// nothing else. Anything else is refused, naming what arrived, so a mistaken payload is not taken
/// for a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    Schedule { time: String },
    Manual,
    RedriveDeadLetters,
}

/// A payload that is neither the schedule's event nor `{}`: what the invoker is told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadTrigger(String);

impl BadTrigger {
    pub fn new(why: String) -> Self {
        Self(why)
    }
}

/// A direct invocation's refusal as Lambda reports it: `errorType` is the stable code.
impl From<BadTrigger> for lambda_runtime::Diagnostic {
    fn from(e: BadTrigger) -> Self {
        Self { error_type: "INVALID_TRIGGER".into(), error_message: e.to_string() }
    }
}

impl Trigger {
    pub fn parse(payload: &serde_json::Value) -> Result<Self, BadTrigger> {
        let Some(fields) = payload.as_object() else {
            return Err(BadTrigger(format!("reconcile takes the schedule's event or {{}}, not {payload}")));
        };
        if fields.is_empty() {
            return Ok(Self::Manual);
        }
        if fields.len() == 1 && fields.get("redrive").and_then(|v| v.as_str()) == Some("dead-letters") {
            return Ok(Self::RedriveDeadLetters);
        }
        let source = fields.get("source").and_then(|v| v.as_str());
        let kind = fields.get("detail-type").and_then(|v| v.as_str());
        if source == Some("aws.events") && kind == Some("Scheduled Event") {
            let time = fields.get("time").and_then(|v| v.as_str()).unwrap_or_default().to_owned();
            return Ok(Self::Schedule { time });
        }
        let mut names: Vec<&str> = fields.keys().map(String::as_str).collect();
        names.sort_unstable();
        Err(BadTrigger(format!(
            "reconcile takes the schedule's event (source \"aws.events\", detail-type \"Scheduled Event\"), {{}} or {{\"redrive\": \"dead-letters\"}}; got an object with {}",
            names.join(", ")
        )))
    }
}

/// What one run did; logged and returned to the caller (the schedule, or an admin's invoke).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReconcileReport {
    pub events: u32,
    pub rebuilt: u32,
    pub rebuild_waiting: u32,
    pub redriven: u32,
    pub cleared: u32,
    pub outbox_left: u64,
    /// Cancelled numbers given back now (a crash or a lost cache had left them).
    pub returned: u32,
    /// A sharded event's numbers left on their way between buckets (the process moving them
    /// stopped), moved in now: on sale at their destination, or a late order's claim taken in.
    pub moves_finished: u32,
    /// A sharded event's promotions of a user who joined the waitlist after the sale (a returned
    /// number handed to them) left between bucket 0 and their home, settled now.
    pub promotions_settled: u32,
    /// Tickets Redis counts as held whose order is neither stored in DynamoDB nor in the outbox:
    /// an order that can no longer reach its user. Zero unless something lost writes.
    pub drift: u64,
    pub snapshots: u32,
    /// Sharded events on sale whose buckets share a master as the cluster's slot map says now (a
    /// reshard since the release moved one): the sale runs at that master's rate. Release warns
    /// once (`BUCKETS_SHARE_A_MASTER`); this says it on every run until the slots are moved back.
    pub buckets_sharing_a_master: u32,
    /// Closing notices sent to users who waited in vain (waitlists closed after `cancel_until`).
    pub notices: u32,
    /// The warm fleet as this run left it (none where no fleet is kept: the local runner).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fleet: Option<Converged>,
    pub failures: u32,
    /// A scheduled run that found another under way and did nothing.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub skipped: bool,
}

#[derive(Clone)]
pub struct Reconcile {
    store: Store,
    gate: Gate,
    queue: OrderQueue,
    /// Seals what the re-drive sends, as grab sealed it.
    seal: StagedSecret<SealKey>,
    rebuilder: Rebuilder,
    returns: GiveBacks,
    /// Keeps each order it sends again in its sent record first, as grab does.
    courier: Courier,
    settings: ReconcileSettings,
    /// Provisioned concurrency around each open (docs/DESIGN.md section 12); `None` locally.
    fleet: Option<Fleet>,
    /// The orders queue's DLQ, for an operator's redrive; `None` where none is configured.
    dead_letters: Option<DeadLetters>,
}

/// What an operator's redrive did: the messages moved back to the orders queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Redriven {
    pub moved_back: u32,
}

/// At most this many messages per redrive (a run stays within reconcile's timeout; ask again for more).
const REDRIVE_BATCH: u32 = 1_000;

impl Reconcile {
    pub fn new(
        store: Store,
        gate: Gate,
        queue: OrderQueue,
        seal: StagedSecret<SealKey>,
        rebuild: RebuildSettings,
        settings: ReconcileSettings,
        fleet: Option<Fleet>,
    ) -> Self {
        let rebuilder = Rebuilder::new(store.clone(), gate.clone(), queue.clone(), rebuild);
        let courier = Courier::new(gate.clone(), queue.clone(), seal.clone());
        let returns = GiveBacks::new(gate.clone(), store.clone(), courier.clone());
        Self { store, gate, queue, seal, rebuilder, returns, courier, settings, fleet, dead_letters: None }
    }

    /// With the orders queue's DLQ, which an operator's redrive empties.
    pub fn with_dead_letters(mut self, dead_letters: Option<DeadLetters>) -> Self {
        self.dead_letters = dead_letters;
        self
    }

    /// An operator's redrive: the DLQ's messages back on the orders queue, bodies and seals
    /// unchanged (mail stores each order once, whatever it receives twice).
    pub async fn redrive_dead_letters(&self) -> Result<Redriven, ReconcileError> {
        let Some(dead_letters) = &self.dead_letters else {
            return Err(ReconcileError::NoDeadLetters);
        };
        let moved_back = dead_letters.move_back(&self.queue, REDRIVE_BATCH).await?;
        tracing::info!(moved_back, "dead letters moved back to the orders queue");
        Ok(Redriven { moved_back })
    }

    pub async fn from_env() -> Result<Self, super::StartError> {
        let settings = ReconcileSettings::from_env()?;
        let rebuild = crate::config::RebuildSettings::from_env()?;
        let adapters = Adapters::from_env().await;
        let queue_settings = QueueSettings::from_env()?;
        Ok(Self::new(
            adapters.store_from_env()?,
            adapters.gate_from_env().await?,
            adapters.orders_queue(&queue_settings),
            crate::config::seal_keys(adapters.sdk()).await?,
            rebuild,
            settings,
            Fleet::from_env(adapters.sdk())?,
        )
        .with_dead_letters(adapters.dead_letters(&queue_settings)))
    }

    /// A run started by `trigger`, one at a time (a lease in the cache, for at most the function's
    /// timeout): a scheduled run finding another under way is skipped (the next minute's comes);
    /// a run asked for by hand waits for the one under way, a while, then runs. A cache that
    /// cannot be asked does not stop the run (its steps take their own locks).
    pub async fn run_alone(&self, trigger: &Trigger) -> ReconcileReport {
        let deadline = std::time::Instant::now() + RUN_WAIT;
        let token = loop {
            match self.gate.lease_run(RUN_LEASE).await {
                Ok(Some(token)) => break Some(token),
                Ok(None) if matches!(trigger, Trigger::Schedule { .. }) => {
                    tracing::warn!("another reconcile run is under way; this one is skipped");
                    return ReconcileReport { skipped: true, ..ReconcileReport::default() };
                }
                Ok(None) if std::time::Instant::now() < deadline => {
                    tokio::time::sleep(std::time::Duration::from_millis(250)).await
                }
                Ok(None) => break None,
                Err(e) => {
                    tracing::warn!(error = %e, "the run's lease could not be taken; running");
                    break None;
                }
            }
        };
        let report = self.run().await;
        if let Some(token) = token
            && let Err(e) = self.gate.end_run(&token).await
        {
            tracing::warn!(error = %e, "the run's lease could not be given back; it expires");
        }
        report
    }

    pub async fn run(&self) -> ReconcileReport {
        let started = std::time::Instant::now();
        let mut report = ReconcileReport::default();
        let events = match self.store.all_events().await {
            Ok(events) => events,
            Err(e) => {
                tracing::error!(error = %e, "reconcile could not list events");
                report.failures += 1;
                return report;
            }
        };
        let now = OffsetDateTime::now_utc();
        // 0. the warm fleet first: an open's minutes matter more than any other step's
        if let Some(fleet) = &self.fleet {
            // Which events the fleet is for, named before it is asked for: its environments read
            // them at their init, not at the open.
            let (warming, until) = fleet.warming(events.iter().map(|s| &s.event), now);
            if let Err(e) = self.gate.set_warming(&warming, until).await {
                tracing::error!(error = %e, "reconcile could not name the events the warm fleet is for");
                report.failures += 1;
            }
            match fleet.keep(events.iter().map(|s| &s.event), now).await {
                Ok(converged) => report.fleet = Some(converged),
                Err(e) => {
                    tracing::error!(error = %e, "reconcile could not keep the warm fleet; the next run retries");
                    report.failures += 1;
                }
            }
        }
        // While the queue holds messages, the outbox's young entries are most likely among them.
        let outbox_age = match self.queue.in_flight().await {
            Ok(0) => self.settings.outbox_age,
            Ok(_) => self.settings.outbox_max_wait.max(self.settings.outbox_age),
            Err(e) => {
                tracing::warn!(error = %e, "queue depth unknown; re-driving as if it were empty");
                self.settings.outbox_age
            }
        };
        for stored in events.iter().filter(|s| s.event.active_until() > now - QUIET_AFTER_END) {
            report.events += 1;
            if let Err(e) = self.event(stored, now, outbox_age, &mut report).await {
                tracing::warn!(event_id = %stored.event.id, error = %e, "reconcile of an event failed; the next run retries");
                report.failures += 1;
            }
        }
        tracing::info!(report = ?report, latency_ms = started.elapsed().as_secs_f64() * 1000.0, "reconcile run");
        let warm = report.fleet.map(|f| f.size).unwrap_or_default();
        crate::metrics::counts(
            "reconcile",
            &[
                ("WarmGrab", warm.grab.into()),
                ("WarmVerifyHash", warm.verify_hash.into()),
                ("OutboxSize", report.outbox_left),
                ("Redriven", report.redriven.into()),
                ("Cleared", report.cleared.into()),
                ("Rebuilt", report.rebuilt.into()),
                ("Returned", report.returned.into()),
                ("MovesFinished", report.moves_finished.into()),
                ("PromotionsSettled", report.promotions_settled.into()),
                ("WaitlistNotices", report.notices.into()),
                ("Drift", report.drift),
                ("BucketsShareAMaster", report.buckets_sharing_a_master.into()),
                ("Failures", report.failures.into()),
            ],
        );
        report
    }

    async fn event(
        &self,
        stored: &StoredEvent,
        now: OffsetDateTime,
        outbox_age: std::time::Duration,
        report: &mut ReconcileReport,
    ) -> Result<(), ReconcileError> {
        let event = &stored.event;
        // 1. a lost cache of a sale not yet over is rebuilt
        let mut stock = self.gate.stock(&event.id).await?;
        if stock.is_none() && now < event.active_until() {
            match self.rebuilder.rebuild(event).await? {
                Rebuild::Done => report.rebuilt += 1,
                Rebuild::Busy => report.rebuild_waiting += 1,
                Rebuild::Present | Rebuild::Ended => {}
            }
            stock = self.gate.stock(&event.id).await?;
        }
        // 2. a sharded event's numbers left on their way between buckets are moved in, and joins'
        //    promotions left between bucket 0 and the user's home are settled
        report.moves_finished += self.gate.tidy_moves(&event.id, crate::gate::MOVE_SETTLE_AGE).await?;
        report.promotions_settled += self.gate.tidy_hands(&event.id, outbox_age).await?;
        // 3. the outbox: durable orders leave it, the others are sent again
        for entry in self.gate.outbox_due(&event.id, outbox_age, OUTBOX_BATCH).await? {
            let (durable, user) = match OrderMessage::parse(&entry.message) {
                Ok(order) => (self.store.get_order(&event.id, &order.user_id).await?.is_some(), Some(order.user_id)),
                Err(reason) => {
                    tracing::error!(event_id = %event.id, reason = %reason, "malformed outbox entry removed");
                    (true, None)
                }
            };
            if durable {
                self.gate.remove_from_outbox(&event.id, user.as_ref(), &entry.order_id).await?;
                report.cleared += 1;
            } else if self.courier.keep(&event.id, &entry.order_id, &entry.message, None).await.is_some() {
                // Kept in its sent record first, as any order is before it is sent.
                self.courier.send(&entry.message).await?;
                report.redriven += 1;
            }
        }
        report.outbox_left += self.gate.outbox_len(&event.id).await?;
        // 3b. the sent records: an entry whose order was stored a while ago leaves; one whose order
        //     is neither stored nor in the outbox any more (the outbox lost it) is sent again from
        //     the record.
        self.tidy_sent(&event.id, outbox_age, report).await?;
        // 4. cancellations whose number Redis has not taken back (the cache must be there)
        if stock.is_some() {
            for due in self.store.give_backs_due(&event.id).await? {
                let gave = self.returns.give_back(&event.id, &due).await?;
                if matches!(gave, GaveBack::Promoted { .. } | GaveBack::Freed | GaveBack::HeldBack) {
                    report.returned += 1;
                }
                // A line that lost a key: repaired, and its give-backs run at the next pass.
                if gave == GaveBack::LineLost
                    && self.rebuilder.repair(event, "the waitlist's line and its heads disagree").await?
                        == Rebuild::Done
                {
                    report.rebuilt += 1;
                    break;
                }
            }
            report.drift += self.drift(&event.id).await?;
            if now < event.active_until() && self.whole(event).await? == Rebuild::Done {
                report.rebuilt += 1;
            }
            stock = self.gate.stock(&event.id).await?;
        }
        // 5. after `cancel_until`: the waitlist closes, and each user still waiting is told once
        if now >= event.cancel_until && !stored.waitlist_closed {
            self.close_waitlist(&event.id, now, report).await?;
        }
        // 6. the snapshot served while Redis is down
        if let Some(left) = stock.filter(|left| *left != stored.remaining_snapshot) {
            self.store.set_remaining(&event.id, left).await?;
            report.snapshots += 1;
        }
        // 7. a sharded sale's buckets still on distinct masters (a reshard may have moved one)
        if event.buckets > 1 && now < event.sale_end {
            self.recheck_masters(event, report).await;
        }
        Ok(())
    }

    async fn tidy_sent(
        &self,
        event: &crate::domain::EventId,
        age: std::time::Duration,
        report: &mut ReconcileReport,
    ) -> Result<(), ReconcileError> {
        let now = crate::domain::event::epoch_ms(OffsetDateTime::now_utc());
        let (cutoff, stored_cutoff) =
            (now - age.as_millis() as i64, now - crate::gate::SENT_KEPT_STORED.as_millis() as i64);
        for bucket in self.gate.buckets(event).await?.iter() {
            for (entry, stored) in self.gate.sent_entries(bucket).await? {
                match stored {
                    // Stored a while ago: DynamoDB's index has long shown it.
                    Some(at) if at <= stored_cutoff => {
                        self.gate.forget_sent(bucket, &entry.order_id).await?;
                        report.cleared += 1;
                        continue;
                    }
                    Some(_) => continue,
                    None if entry.order_id.created_ms().is_some_and(|ms| ms > cutoff) => continue,
                    None => {}
                }
                let Ok(order) = OrderMessage::parse(&entry.message) else { continue };
                // Stored (its mark lost: a rebuild's stop or a failed write), or the user holds
                // another order (then this one is never stored: the consumer drops a second one).
                if self.store.get_order_now(event, &order.user_id).await?.is_some() {
                    self.gate.forget_sent(bucket, &entry.order_id).await?;
                    report.cleared += 1;
                } else if self.gate.outbox_entry(event, &order.user_id, &entry.order_id).await?.is_none() {
                    self.courier.send(&entry.message).await?;
                    report.redriven += 1;
                }
            }
        }
        Ok(())
    }

    /// The slot map read again for a sharded sale: the warning release gave, said each run while
    /// it holds (a log line and the `BucketsShareAMaster` metric the alarms can watch). Best effort,
    /// last of the event's steps: a slot map that cannot be read, or a slot no master serves (a
    /// cluster mid-failover), says nothing and fails nothing.
    async fn recheck_masters(&self, event: &crate::domain::event::Event, report: &mut ReconcileReport) {
        let masters = match self.gate.bucket_masters(&self.gate.buckets_of(event)).await {
            Ok(Some(masters)) if !masters.iter().any(|m| m == crate::gate::NO_MASTER) => masters,
            Ok(_) => return,
            Err(e) => {
                tracing::warn!(event_id = %event.id, error = %e, "the cluster's slot map could not be read");
                return;
            }
        };
        if let Some(warning) = crate::domain::warm_fleet::shared_masters(&masters) {
            tracing::warn!(event_id = %event.id, code = warning.code, detail = %warning.detail, "a sharded sale's buckets share a master");
            report.buckets_sharing_a_master += 1;
        }
    }

    /// Closes the waitlist once nothing can still reach it: every give-back run (a returned number
    /// may still promote someone), then Redis closed (no more promotions; the addresses leave),
    /// then every promotion stored (the outbox empty). Each user whose place is still waiting and
    /// who holds no order gets one notice through the queue (the mail consumer sends it once).
    async fn close_waitlist(
        &self,
        event: &crate::domain::EventId,
        now: OffsetDateTime,
        report: &mut ReconcileReport,
    ) -> Result<(), ReconcileError> {
        if !self.store.give_backs_due(event).await?.is_empty() {
            return Ok(());
        }
        self.gate.close_waitlist(event).await?;
        if self.gate.outbox_len(event).await? > 0 {
            return Ok(());
        }
        for waiter in self.store.waiters(event).await? {
            if self.store.get_order_now(event, &waiter.user).await?.is_some() {
                self.store.promoted_waiter(event, &waiter.user).await?;
                continue;
            }
            let notice = ClosedNotice::new(event.clone(), waiter.user, waiter.email);
            self.queue.send_sealed(&notice.body(), &self.seal).await?;
            report.notices += 1;
        }
        self.store.mark_waitlist_closed(event, now).await?;
        Ok(())
    }

    /// Tickets Redis counts as held whose order is neither durable nor in the outbox. Redis is read
    /// first (holdings and outbox together), DynamoDB after: an order the consumer stores meanwhile
    /// is durable by the time DynamoDB is read, so nothing in flight counts.
    /// Whether the cache lost part of itself while the rest is there (a key gone: with the
    /// template's noeviction nothing evicts one, but an operator's `DEL` or a fault may): a number
    /// in no place of the cache (not on sale, moving, held back, held, nor on its way to the line)
    /// or in two, or, once sold out, a durable waiting place whose user holds nothing missing from
    /// the line. Read from the cache (and the waiting places from DynamoDB only once sold out), at
    /// most once per `RECONCILE_WHOLE_EVERY_SECONDS`; found in two looks in a row (a sale's traffic
    /// can show a moment of either), the cache is repaired from DynamoDB, unless a repair already
    /// met that very finding and did not mend it (then it is logged, not repaired again).
    async fn whole(&self, event: &crate::domain::Event) -> Result<Rebuild, ReconcileError> {
        let id = &event.id;
        if !self.gate.may_look_whole(id, self.settings.whole_every).await? {
            return Ok(Rebuild::Present);
        }
        let Some(places) = self.gate.places(id, event.capacity).await? else { return Ok(Rebuild::Present) };
        let mut missing: Vec<String> = if places.sold_out {
            self.store
                .waiters(id)
                .await?
                .into_iter()
                .filter(|w| !places.taken.contains(&w.user) && !places.line.contains(&w.user))
                .map(|w| w.user.to_string())
                .collect()
        } else {
            Vec::new()
        };
        if places.lost.is_empty() && places.doubled.is_empty() && missing.is_empty() {
            return Ok(Rebuild::Present);
        }
        missing.sort_unstable();
        let finding =
            format!("in no place {:?}; in two {:?}; not in the line {missing:?}", places.lost, places.doubled);
        if !self.gate.found_again(id, &finding).await? {
            tracing::warn!(event_id = %id, finding, "the cache may have lost part of itself: looked at again next run");
            return Ok(Rebuild::Present);
        }
        if self.gate.repaired_before(id, &finding).await? {
            tracing::error!(event_id = %id, finding, "a repair did not mend the cache: left for an operator");
            return Ok(Rebuild::Present);
        }
        let repaired = self.rebuilder.repair(event, &finding).await?;
        if repaired == Rebuild::Done {
            self.gate.remember_repaired(id, &finding).await?;
        }
        Ok(repaired)
    }

    async fn drift(&self, event: &crate::domain::EventId) -> Result<u64, ReconcileError> {
        let (held, outbox) = self.gate.holdings_and_outbox(event).await?;
        if held.is_empty() {
            return Ok(0);
        }
        let stored = self.store.order_ids(event).await?;
        let lost: Vec<_> = held.iter().filter(|b| !outbox.contains(&b.order) && !stored.contains(&b.order)).collect();
        for b in lost.iter().take(10) {
            tracing::error!(event_id = %event, order_id = %b.order, ticket_no = %b.ticket_no, "drift: a ticket Redis holds for an order that is nowhere");
        }
        Ok(lost.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::Trigger;

    #[test]
    fn the_schedule_an_empty_object_and_a_redrive_start_what_they_name_and_nothing_else_does() {
        let schedule =
            json!({"source": "aws.events", "detail-type": "Scheduled Event", "time": "2026-11-22T10:00:00Z"});
        assert_eq!(Trigger::parse(&schedule), Ok(Trigger::Schedule { time: "2026-11-22T10:00:00Z".into() }));
        assert_eq!(Trigger::parse(&json!({})), Ok(Trigger::Manual));
        let err = Trigger::parse(&json!({"title": "x", "capacity": 3})).unwrap_err();
        assert!(err.to_string().contains("capacity, title"), "{err}");
        assert_eq!(lambda_runtime::Diagnostic::from(err).error_type, "INVALID_TRIGGER");
        assert!(Trigger::parse(&json!("run")).is_err());
        assert!(Trigger::parse(&json!({"source": "aws.s3", "detail-type": "Scheduled Event"})).is_err());
        assert_eq!(Trigger::parse(&json!({"redrive": "dead-letters"})), Ok(Trigger::RedriveDeadLetters));
        assert!(Trigger::parse(&json!({"redrive": "everything"})).is_err());
        assert!(Trigger::parse(&json!({"redrive": "dead-letters", "capacity": 3})).is_err());
    }
}
