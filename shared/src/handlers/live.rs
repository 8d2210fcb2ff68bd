//! The organiser's live view of a sale (`GET /admin/events/{id}/live`), served by query and polled
//! every second by the organiser's page: cheap enough for that without touching the grab path
//! (docs/DESIGN.md section 12).
//!
//! - The stock, the orders on their way and the waitlist: one pipeline of O(1) reads on the
//!   event's slot (`Gate::sale_now`), no script.
//! - Grabs per second by outcome: the tallies the grab environments write about once a second
//!   (`gate::tally`), on a slot of their own.
//! - The audit (confirmed, mailed, checked in, the invariants): computed from DynamoDB at most
//!   every [`AUDIT_EVERY`] per environment and event, and served from memory between, with the
//!   time it was taken: a page polled every second by several organisers costs DynamoDB one
//!   audit per five seconds. A ballot's entries and a fair open's queue are counted with it.
//! - Requests turned away by reason (a forged hash, a user over their limit, a user a fair open
//!   has not admitted, a grab at a ballot), from the same tallies; the oldest order decided and
//!   not yet stored (the outbox's ids, only while orders are on their way).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use serde::Serialize;
use time::OffsetDateTime;

use crate::{
    domain::{
        Event, EventId, UserId,
        audit::{AuditRow, Ledger, ORDER_LATE_AFTER, Report},
        event::{SaleState, rfc3339},
        sale_mode::{self, SaleMode},
    },
    gate::{Gate, GrabCounts},
    handlers::draws::published_draw::DrawView,
    http::ApiError,
    store::Store,
};

/// How old the live view's audit may be.
pub const AUDIT_EVERY: Duration = Duration::from_secs(5);
/// The rates' window when the page does not say: the last five minutes.
pub const DEFAULT_MINUTES: u32 = 5;
/// The longest window a page may ask for (the tallies are kept 15 minutes).
pub const MAX_MINUTES: u32 = 15;
/// The requests turned away that the organiser sees counted, by their codes.
pub const BLOCKED: [&str; 4] = ["BAD_HASH", "RATE_LIMITED", "NOT_ADMITTED", "BALLOT_ONLY"];

/// The audit, from the durable record and the cache.
#[derive(Clone)]
pub struct Auditor {
    store: Store,
    gate: Gate,
    /// An order waiting this long, with nothing stored for as long, fails the audit.
    stuck_after: Duration,
    /// A ballot's published draw, which its check recomputes against.
    draws: DrawView,
    /// The orders queue, whose consumer's last store tells a sale behind others from a stop.
    queue: String,
}

impl Auditor {
    pub fn new(store: Store, gate: Gate, draws: DrawView, stuck_after: Duration, queue: &str) -> Self {
        Self { store, gate, draws, stuck_after, queue: queue.to_owned() }
    }

    /// The organiser's audit, computed from the durable record (every stored order and ticket
    /// item, the pending give-backs) and the cache (read first, in one step, so an order it shows
    /// on its way is stored by the time DynamoDB is read). A failed check is read again once, all
    /// of it: a grab or a cancellation between the reads, or an index not yet caught up, can make
    /// one reading disagree; a real fault disagrees twice.
    pub async fn report(&self, event: &Event) -> Result<Report, ApiError> {
        Ok(self.report_and_drain(event).await?.0)
    }

    /// The report, and how the orders on their way are draining (the live view's figures).
    pub async fn report_and_drain(&self, event: &Event) -> Result<(Report, Drain), ApiError> {
        let first = self.audit(event).await?;
        if first.0.passed {
            return Ok(first);
        }
        self.audit(event).await
    }

    async fn audit(&self, whole: &Event) -> Result<(Report, Drain), ApiError> {
        let (event, capacity) = (&whole.id, whole.capacity);
        // The cache is optional: without it the report goes on, that check says so.
        let cache = self.gate.audit_view(event).await.unwrap_or_else(|e| {
            tracing::warn!(event_id = %event, error = %e, "cache unreadable; the audit goes on without it");
            None
        });
        let returning = self.store.give_backs_due(event).await?.into_iter().map(|d| d.ticket_no).collect();
        let oldest = self.gate.oldest_in_outbox(event).await.unwrap_or_else(|e| {
            tracing::warn!(event_id = %event, error = %e, "outbox unreadable; the audit goes on without its age");
            None
        });
        let orders = self.store.all_orders(event).await?;
        let consumer_stored = self.gate.consumer_stored(&self.queue).await.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "the consumer's last store unreadable");
            None
        });
        let drain = Drain {
            oldest_ms: oldest,
            consumer_stored: consumer_stored
                .and_then(|ms| OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).ok()),
            last_stored: orders
                .iter()
                .filter_map(|o| o.confirmed_at.as_deref())
                .filter_map(|at| OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339).ok())
                .max(),
        };
        let mut by_door = std::collections::BTreeMap::<String, u64>::new();
        for order in orders.iter().filter(|o| o.checked_in_at.is_some()) {
            let door = order.checked_in_door.as_deref().unwrap_or(crate::store::check_in::NO_DOOR_NAMED);
            *by_door.entry(door.to_owned()).or_default() += 1;
        }
        let rows: Vec<AuditRow> = orders.into_iter().map(|r| r.audit_row()).collect();
        let tickets = self.store.ticket_items(event, capacity).await?;
        let rebuilds = self.store.rebuilds(event).await?;
        let ledger = Ledger { tickets, give_backs_pending: returning, cache, rebuilds };
        let mut report = crate::domain::audit::report(event, capacity, &rows, &ledger);
        report.check_ins_by_door = by_door;
        report = report.with_orders_in_time(
            drain.oldest_age(),
            drain.since_last_store(),
            drain.since_consumer_stored(),
            self.stuck_after,
        );
        if let Some(packet) = &whole.red_packet {
            report = report.with_red_packet(packet, &rows);
        }
        if whole.draw.is_some() {
            let drawn = self.draws.published_of(whole).await?;
            report = if whole.sale_mode == SaleMode::Ballot {
                let places: Vec<(UserId, u64)> =
                    self.store.waiters(event).await?.into_iter().map(|w| (w.user, w.place)).collect();
                let laid = whole.capacity as usize + whole.waitlist_size as usize;
                report.with_draw(drawn.as_deref().map(|d| d.order(laid)), &rows, &places, &ledger)
            } else {
                report.with_queue_draw(drawn.as_deref().map(|d| d.order(0)))
            };
        }
        Ok((report, drain))
    }
}

/// The orders on their way, as the audit last read them: the oldest one's creation (unix ms, from
/// its UUIDv7 id) and when an order was last stored, so a long drain that is moving is told from
/// one that stopped.
#[derive(Debug, Clone, Copy, Default)]
pub struct Drain {
    pub oldest_ms: Option<i64>,
    pub last_stored: Option<OffsetDateTime>,
    /// When the consumer last stored an order of any sale.
    pub consumer_stored: Option<OffsetDateTime>,
}

impl Drain {
    fn oldest_age(&self) -> Option<Duration> {
        self.oldest_ms.map(age_of)
    }

    fn since_last_store(&self) -> Option<Duration> {
        self.last_stored.map(|at| (OffsetDateTime::now_utc() - at).unsigned_abs())
    }

    fn since_consumer_stored(&self) -> Option<Duration> {
        self.consumer_stored.map(|at| (OffsetDateTime::now_utc() - at).unsigned_abs())
    }

    /// The oldest order (this `age`) waits past `stuck_after` and none of this event's was stored
    /// for as long, while the consumer stores other sales' orders.
    fn behind_other_sales(&self, age: Duration, stuck_after: Duration) -> bool {
        age >= stuck_after
            && self.since_last_store().is_none_or(|s| s >= stuck_after)
            && self.since_consumer_stored().is_some_and(|s| s < stuck_after)
    }
}

/// How long ago an order made at `created_ms` (unix ms) was, on this clock.
fn age_of(created_ms: i64) -> Duration {
    let now_ms = (OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64;
    Duration::from_millis(now_ms.saturating_sub(created_ms).max(0) as u64)
}

/// What the live route answers: the event, and the sale now.
#[derive(Debug, Serialize)]
pub struct LiveView {
    #[serde(flatten)]
    pub event: Event,
    /// When this view was read.
    pub at: String,
    /// `live`, or `unavailable` when the cache could not be read (the three figures are then null).
    pub cache: &'static str,
    /// Not started, open, sold out or ended (null while open and the cache cannot say).
    pub state: Option<SaleState>,
    /// While sold out: the second the last number went, when the tallies still hold it.
    pub sold_out_at: Option<String>,
    pub remaining: Option<u64>,
    pub in_flight: Option<u64>,
    pub waiting: Option<u64>,
    pub grabs: Rates,
    /// Requests turned away in the window, by [`BLOCKED`] code (every code, 0 when none).
    pub blocked: std::collections::BTreeMap<&'static str, u64>,
    /// The oldest order decided and not yet stored, while one is.
    pub oldest_unconfirmed: Option<Unconfirmed>,
    /// Messages on the shared orders queue, every sale's (SQS's approximate count, read at most
    /// every few seconds; null when it could not be read): beside `in_flight`, this event's own.
    pub queue_depth: Option<u64>,
    /// From this age an order waiting to be stored is late, from the next stuck (the audit fails).
    pub order_late_after_s: u64,
    pub order_stuck_after_s: u64,
    /// A ballot's entries or a fair open's queue (`None` for a first-come sale).
    pub entries: Option<EntriesNow>,
    pub audit: AuditNow,
}

#[derive(Debug, Serialize)]
pub struct Unconfirmed {
    pub created_at: String,
    pub age_s: u64,
    /// When an order was last stored: a long drain that moves is not a stuck one.
    pub last_stored_at: Option<String>,
    /// Older than `order_stuck_after_s` and nothing stored for as long: the audit fails.
    pub stuck: bool,
    /// Older than `order_stuck_after_s`, this event's orders not stored meanwhile, but the consumer
    /// stores other sales' orders: queued behind them on the shared queue, not stuck.
    pub behind_other_sales: bool,
    /// When the consumer last stored an order of any sale.
    pub consumer_stored_at: Option<String>,
}

/// Who entered a draw, and where it stands.
#[derive(Debug, Clone, Serialize)]
pub struct EntriesNow {
    pub mode: SaleMode,
    /// Entries (a ballot) or users queued (a fair open, late arrivals included).
    pub entered: u64,
    /// A fair open's users who queued after the draw (behind every shuffled place).
    pub late: u64,
    pub drawn_at: Option<String>,
    /// Every winner's order sent and every other entrant placed.
    pub done: bool,
    /// A fair open after its draw: users admitted so far, at `admission_rate` a second, the last
    /// of them at `all_admitted_at`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admitted: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admission_rate: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub all_admitted_at: Option<String>,
}

/// What the audit's cadence counts of a draw.
#[derive(Debug, Clone)]
struct Drawn {
    entered: u64,
    late: u64,
    drawn_at: Option<OffsetDateTime>,
    done: bool,
}

/// Grabs per second by outcome in `from..=until` (unix seconds); seconds without a grab are left out.
#[derive(Debug, Serialize)]
pub struct Rates {
    pub from: i64,
    pub until: i64,
    pub per_second: Vec<Second>,
}

#[derive(Debug, Serialize)]
pub struct Second {
    pub second: i64,
    pub outcomes: std::collections::BTreeMap<String, u64>,
}

/// The audit and when it was taken.
#[derive(Debug, Clone, Serialize)]
pub struct AuditNow {
    pub as_of: String,
    #[serde(flatten)]
    pub report: Report,
}

#[derive(Clone)]
pub struct Live {
    gate: Gate,
    auditor: Auditor,
    audits: Arc<Mutex<HashMap<EventId, Audited>>>,
    /// Reads the shared queue's depth (the rebuild's reading, shared).
    rebuilder: Option<crate::recovery::Rebuilder>,
}

/// An event's audit, its draw's counts, its drain, and when they were taken.
type Audited = (Instant, AuditNow, Option<Drawn>, Drain);

impl Live {
    pub fn new(gate: Gate, auditor: Auditor, rebuilder: Option<crate::recovery::Rebuilder>) -> Self {
        Self { gate, auditor, audits: Arc::default(), rebuilder }
    }

    async fn queue_depth(&self) -> Option<u64> {
        match &self.rebuilder {
            Some(r) => r.queue_depth().await,
            None => None,
        }
    }

    pub async fn view(&self, event: &Event, minutes: u32) -> Result<LiveView, ApiError> {
        let now = OffsetDateTime::now_utc();
        let until = now.unix_timestamp();
        let from = until - i64::from(minutes) * 60 + 1;
        // The cache's figures are optional: the audit still answers when Redis cannot.
        let (sale, counts) = match tokio::try_join!(
            self.gate.sale_now(&event.id),
            self.gate.grab_counts(&event.id, from, until)
        ) {
            Ok(read) => read,
            Err(e) => {
                tracing::warn!(event_id = %event.id, error = %e, "cache unreadable; the live view goes on without it");
                (None, GrabCounts::new())
            }
        };
        let (audit, drawn, drain) = self.audit(event).await?;
        // The oldest order as the audit last read it (the outbox's ids, every 5 s at most), while
        // the cache says orders are on their way.
        let oldest = drain.oldest_ms.filter(|_| sale.is_some_and(|s| s.in_flight > 0));
        let state = match (event.sale_phase(now), sale) {
            (crate::domain::event::SalePhase::Open, None) => None,
            (_, s) => Some(event.sale_state(now, s.map_or(1, |s| s.remaining.min(u64::from(u32::MAX)) as u32))),
        };
        let sold_out_at = (state == Some(SaleState::SoldOut))
            .then(|| counts.iter().rev().find(|(_, o)| o.contains_key("OK")).map(|(second, _)| *second))
            .flatten()
            .and_then(|second| OffsetDateTime::from_unix_timestamp(second).ok())
            .map(rfc3339);
        let blocked = BLOCKED
            .iter()
            .map(|code| (*code, counts.values().map(|o| o.get(*code).copied().unwrap_or(0)).sum()))
            .collect();
        Ok(LiveView {
            event: event.clone(),
            at: rfc3339(now),
            cache: if sale.is_some() { "live" } else { "unavailable" },
            state,
            sold_out_at,
            remaining: sale.map(|s| s.remaining),
            in_flight: sale.map(|s| s.in_flight),
            waiting: sale.map(|s| s.waiting),
            grabs: Rates {
                from,
                until,
                per_second: counts.into_iter().map(|(second, outcomes)| Second { second, outcomes }).collect(),
            },
            blocked,
            oldest_unconfirmed: oldest.and_then(|ms| {
                let created = OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).ok()?;
                Some(Unconfirmed {
                    created_at: rfc3339(created),
                    age_s: age_of(ms).as_secs(),
                    last_stored_at: drain.last_stored.map(rfc3339),
                    stuck: audit.report.checks.iter().any(|c| c.name == "orders_stored_in_time" && !c.passed),
                    behind_other_sales: drain.behind_other_sales(age_of(ms), self.auditor.stuck_after),
                    consumer_stored_at: drain.consumer_stored.map(rfc3339),
                })
            }),
            queue_depth: self.queue_depth().await,
            order_late_after_s: ORDER_LATE_AFTER.as_secs(),
            order_stuck_after_s: self.auditor.stuck_after.as_secs(),
            entries: drawn.map(|d| entries_now(event, &d, now)),
            audit,
        })
    }

    /// The event's audit, its draw's counts and its drain, at most [`AUDIT_EVERY`] old.
    async fn audit(&self, event: &Event) -> Result<(AuditNow, Option<Drawn>, Drain), ApiError> {
        let fresh = |at: &Instant| at.elapsed() < AUDIT_EVERY;
        if let Some((at, audit, drawn, drain)) = self.audits.lock().unwrap_or_else(|p| p.into_inner()).get(&event.id)
            && fresh(at)
        {
            return Ok((audit.clone(), drawn.clone(), *drain));
        }
        let taken = Instant::now();
        let as_of = rfc3339(OffsetDateTime::now_utc());
        let (report, drain) = self.auditor.report_and_drain(event).await?;
        let audit = AuditNow { as_of, report };
        let drawn = match event.sale_mode {
            // The figures of a draw are the page's, not the audit's: a read that fails leaves
            // them out of this view rather than failing it.
            SaleMode::Ballot | SaleMode::FairOpen => self.drawn(event).await.unwrap_or_else(|e| {
                tracing::warn!(event_id = %event.id, error = %e, "the draw's figures unreadable; the live view goes on without them");
                None
            }),
            _ => None,
        };
        let mut audits = self.audits.lock().unwrap_or_else(|p| p.into_inner());
        // Events of the past leave; the map holds the events organisers look at now.
        audits.retain(|_, (at, ..)| at.elapsed() < AUDIT_EVERY * 12);
        audits.insert(event.id.clone(), (taken, audit.clone(), drawn.clone(), drain));
        Ok((audit, drawn, drain))
    }

    /// A draw's figures: before it, the entries counted (a `COUNT` query of each shard); after
    /// it, the draw's own count and the late arrivals' counter, no query.
    async fn drawn(&self, whole: &Event) -> Result<Option<Drawn>, crate::store::StoreError> {
        let (store, event) = (&self.auditor.store, &whole.id);
        let state = store.ballot_state(event).await?;
        Ok(Some(match state.draw {
            Some(draw) => {
                let late = store.late_joins(event).await?;
                Drawn { entered: u64::from(draw.entrants) + late, late, drawn_at: Some(draw.drawn_at), done: draw.done }
            }
            None => Drawn {
                entered: store.entry_count(event, whole.entry_shards()).await?,
                late: 0,
                drawn_at: None,
                done: false,
            },
        }))
    }
}

/// A draw's figures now: a fair open's queue admits `admission_rate` a second from the draw on.
fn entries_now(event: &Event, drawn: &Drawn, now: OffsetDateTime) -> EntriesNow {
    let mut view = EntriesNow {
        mode: event.sale_mode,
        entered: drawn.entered,
        late: drawn.late,
        drawn_at: drawn.drawn_at.map(rfc3339),
        done: drawn.done,
        admitted: None,
        admission_rate: None,
        all_admitted_at: None,
    };
    // The queue admits once the draw is complete (published).
    if let (Some(terms), Some(at), true) = (&event.queue, drawn.drawn_at, drawn.done) {
        let rate = u64::from(terms.admission_rate.max(1));
        let waves = if now < at { 0 } else { (now - at).whole_seconds() as u64 + 1 };
        view.admitted = Some(drawn.entered.min(waves.saturating_mul(rate)));
        view.admission_rate = Some(terms.admission_rate);
        view.all_admitted_at = Some(rfc3339(sale_mode::admitted_at(at, terms.admission_rate, drawn.entered)));
    }
    view
}
