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
//!   audit per five seconds.

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
        audit::{AuditRow, Ledger, Report},
        event::rfc3339,
        sale_mode::SaleMode,
    },
    gate::{Gate, GrabCounts},
    http::ApiError,
    store::Store,
};

/// How old the live view's audit may be.
pub const AUDIT_EVERY: Duration = Duration::from_secs(5);
/// The rates' window when the page does not say: the last five minutes.
pub const DEFAULT_MINUTES: u32 = 5;
/// The longest window a page may ask for (the tallies are kept 15 minutes).
pub const MAX_MINUTES: u32 = 15;

/// The audit, from the durable record and the cache.
#[derive(Clone)]
pub struct Auditor {
    store: Store,
    gate: Gate,
    /// A ballot's published draw, which its check recomputes against.
    draws: super::draws::DrawView,
}

impl Auditor {
    pub fn new(store: Store, gate: Gate, draws: super::draws::DrawView) -> Self {
        Self { store, gate, draws }
    }

    /// The organiser's audit, computed from the durable record (every stored order and ticket
    /// item, the pending give-backs) and the cache (read first, in one step, so an order it shows
    /// on its way is stored by the time DynamoDB is read). A failed check is read again once, all
    /// of it: a grab or a cancellation between the reads, or an index not yet caught up, can make
    /// one reading disagree; a real fault disagrees twice.
    pub async fn report(&self, event: &Event) -> Result<Report, ApiError> {
        let first = self.audit(event).await?;
        if first.passed {
            return Ok(first);
        }
        self.audit(event).await
    }

    async fn audit(&self, whole: &Event) -> Result<Report, ApiError> {
        let (event, capacity) = (&whole.id, whole.capacity);
        // The cache is optional: without it the report goes on, that check says so.
        let cache = self.gate.audit_view(event).await.unwrap_or_else(|e| {
            tracing::warn!(event_id = %event, error = %e, "cache unreadable; the audit goes on without it");
            None
        });
        let returning = self.store.give_backs_due(event).await?.into_iter().map(|d| d.ticket_no).collect();
        let rows: Vec<AuditRow> = self
            .store
            .all_orders(event)
            .await?
            .into_iter()
            .map(|r| AuditRow {
                ticket_no: r.ticket_no,
                mailed: r.mail_status.as_deref() == Some("SENT"),
                promoted: r.promoted,
                checked_in: r.checked_in_at.is_some(),
                check_in_conflicts: r.check_in_conflicts,
                order_id: r.order_id,
                user_id: r.user_id,
                status: r.status,
            })
            .collect();
        let tickets = self.store.ticket_items(event, capacity).await?;
        let rebuilds = self.store.rebuilds(event).await?;
        let ledger = Ledger { tickets, give_backs_pending: returning, cache, rebuilds };
        let mut report = crate::domain::audit::report(event, capacity, &rows, &ledger);
        if let Some(packet) = &whole.red_packet {
            report = report.with_red_packet(packet, &rows);
        }
        if whole.draw.is_some() {
            let drawn = self.draws.published_of(whole).await?;
            let drawn = drawn.as_deref().map(|d| &d.published);
            report = if whole.sale_mode == SaleMode::Ballot {
                let places: Vec<(UserId, u64)> =
                    self.store.waiters(event).await?.into_iter().map(|w| (w.user, w.place)).collect();
                report.with_draw(drawn, &rows, &places, &ledger)
            } else {
                report.with_queue_draw(drawn)
            };
        }
        Ok(report)
    }
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
    pub remaining: Option<u64>,
    pub in_flight: Option<u64>,
    pub waiting: Option<u64>,
    pub grabs: Rates,
    pub audit: AuditNow,
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
    audits: Arc<Mutex<HashMap<EventId, (Instant, AuditNow)>>>,
}

impl Live {
    pub fn new(gate: Gate, auditor: Auditor) -> Self {
        Self { gate, auditor, audits: Arc::default() }
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
        let audit = self.audit(event).await?;
        Ok(LiveView {
            event: event.clone(),
            at: rfc3339(now),
            cache: if sale.is_some() { "live" } else { "unavailable" },
            remaining: sale.map(|s| s.remaining),
            in_flight: sale.map(|s| s.in_flight),
            waiting: sale.map(|s| s.waiting),
            grabs: Rates {
                from,
                until,
                per_second: counts.into_iter().map(|(second, outcomes)| Second { second, outcomes }).collect(),
            },
            audit,
        })
    }

    /// The event's audit, at most [`AUDIT_EVERY`] old.
    async fn audit(&self, event: &Event) -> Result<AuditNow, ApiError> {
        let fresh = |at: &Instant| at.elapsed() < AUDIT_EVERY;
        if let Some((at, audit)) = self.audits.lock().unwrap_or_else(|p| p.into_inner()).get(&event.id)
            && fresh(at)
        {
            return Ok(audit.clone());
        }
        let taken = Instant::now();
        let as_of = rfc3339(OffsetDateTime::now_utc());
        let audit = AuditNow { as_of, report: self.auditor.report(event).await? };
        let mut audits = self.audits.lock().unwrap_or_else(|p| p.into_inner());
        // Events of the past leave; the map holds the events organisers look at now.
        audits.retain(|_, (at, _)| at.elapsed() < AUDIT_EVERY * 12);
        audits.insert(event.id.clone(), (taken, audit.clone()));
        Ok(audit)
    }
}
