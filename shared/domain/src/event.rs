//! An event: what an organiser releases, with its tickets numbered 1..capacity and a sale window.

use serde::Serialize;
use serde_json::{Map, Value};
use time::{Duration, OffsetDateTime, format_description::well_known::Rfc3339};

use super::{
    ids::EventId,
    red_packet::{self, AmountSeed, Currency, RedPacket},
    sale_mode::{BeaconRound, DrawTerms, MAX_ADMISSION_RATE, QueueTerms, SaleMode},
};

/// Hard cap on tickets per event: the seat list, the rebuild from DynamoDB and the attendee list
/// are sized for it (the reference drop is 20,000; 100,000 is tested).
pub const MAX_CAPACITY: u32 = 100_000;
/// The largest rate a release may name, grabs per second at the open (`expected_rate`, which
/// sizes the warm fleet: `super::warm_fleet`).
pub const MAX_EXPECTED_RATE: u32 = 1_000_000;
/// The most buckets one event's numbers may be split over (a release's `buckets`; docs/DESIGN.md
/// section 6, "Buckets").
pub const MAX_BUCKETS: u16 = 16;
const MAX_TITLE: usize = 200;
const MAX_TEXT: usize = 2_000;
const MAX_SALE_LENGTH: Duration = Duration::days(90);

/// A released event. Times are UTC instants; the API shows them as RFC 3339.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    pub id: EventId,
    pub title: String,
    pub capacity: u32,
    #[serde(with = "time::serde::rfc3339")]
    pub sale_start: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub sale_end: OffsetDateTime,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub venue: Option<String>,
    #[serde(with = "time::serde::rfc3339::option", skip_serializing_if = "Option::is_none")]
    pub starts_at: Option<OffsetDateTime>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Until when a holder may cancel (and the waitlist be promoted): `sale_end` unless the
    /// organiser set a later time.
    #[serde(with = "time::serde::rfc3339")]
    pub cancel_until: OffsetDateTime,
    /// How many users may wait for a returned ticket (0: no waitlist). The organiser's choice at
    /// release; `capacity` by default.
    pub waitlist_size: u32,
    /// The door's window, as the organiser set it (see [`Event::check_in_window`] for the defaults).
    #[serde(with = "time::serde::rfc3339::option", skip_serializing_if = "Option::is_none")]
    pub check_in_from: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option", skip_serializing_if = "Option::is_none")]
    pub check_in_until: Option<OffsetDateTime>,
    /// Grabs per second the organiser expects at the open: sizes the warm fleet
    /// (`super::warm_fleet`). `None`: no fleet is kept for this event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_rate: Option<u32>,
    /// How many Redis buckets the numbers are split over, each on its own cluster slot, so one
    /// event's grabs are not bounded by one shard (1: unsharded). A first-come sale without a
    /// waitlist only.
    pub buckets: u16,
    /// Red packets: a total split into one amount per ticket number (`super::red_packet`). Shown
    /// without its seed (the commitment instead), which is published after the sale.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "public_red_packet")]
    pub red_packet: Option<RedPacket>,
    /// How the tickets are handed out; a draw's terms are in [`Event::draw`], a fair open's queue in
    /// [`Event::queue`].
    pub sale_mode: SaleMode,
    /// The draw's commitment (and beacon round), published at release: `Some` exactly when
    /// `sale_mode` draws (a ballot, a fair open).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub draw: Option<DrawTerms>,
    /// A fair open's pre-queue: `Some` exactly when `sale_mode` is `fair_open`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueTerms>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

fn public_red_packet<S: serde::Serializer>(packet: &Option<RedPacket>, out: S) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(&packet.as_ref().map(RedPacket::public), out)
}

/// The door opens this long before `starts_at` unless the organiser says otherwise ...
pub const CHECK_IN_BEFORE: time::Duration = time::Duration::hours(2);
/// ... and closes this long after it.
pub const CHECK_IN_AFTER: time::Duration = time::Duration::hours(6);

/// Where a sale stands at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SalePhase {
    NotStarted,
    Open,
    Ended,
}

/// What a crowd is told before it asks anything of the sale (the public state object the edge
/// caches): the phase, and once open whether a number is left.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SaleState {
    NotStarted,
    Open,
    SoldOut,
    Ended,
}

impl Event {
    /// The sale's state at `now` with `remaining` numbers left (a cancellation can open a sold-out
    /// sale again: the state is read, never kept).
    pub fn sale_state(&self, now: OffsetDateTime, remaining: u32) -> SaleState {
        match self.sale_phase(now) {
            SalePhase::NotStarted => SaleState::NotStarted,
            SalePhase::Ended => SaleState::Ended,
            SalePhase::Open if remaining == 0 => SaleState::SoldOut,
            SalePhase::Open => SaleState::Open,
        }
    }

    /// When a draw's entries close: fixed at release (`sale_start` for an event released before
    /// it was kept). `None` for a sale that does not draw.
    pub fn entries_close(&self) -> Option<OffsetDateTime> {
        self.draw.as_ref().map(|d| d.entries_close.unwrap_or(self.sale_start))
    }

    /// Where a draw's entries are kept: one partition for a sale that does not draw.
    pub fn entry_shards(&self) -> super::sale_mode::EntryShards {
        self.draw.as_ref().map(|d| d.entry_shards).unwrap_or_default()
    }

    /// Whether `other` is this event released again: the same definition, whatever its release
    /// time and its red packets' seed (a retry draws a new one; the first is kept).
    pub fn same_release(&self, other: &Event) -> bool {
        let mut other = other.clone();
        other.created_at = self.created_at;
        if let (Some(mine), Some(theirs)) = (&self.red_packet, &mut other.red_packet) {
            theirs.seed = mine.seed.clone();
        }
        // Where the entries are kept, and the receipt keys held at the release, are the
        // deployment's, not the definition's.
        if let (Some(mine), Some(theirs)) = (&self.draw, &mut other.draw) {
            theirs.entry_shards = mine.entry_shards;
            theirs.receipt_keys = mine.receipt_keys.clone();
        }
        *self == other
    }

    pub fn sale_phase(&self, now: OffsetDateTime) -> SalePhase {
        phase(now, self.sale_start, self.sale_end)
    }

    /// Whether a holder may still cancel at `now` (the sale has started and `cancel_until` is ahead).
    pub fn cancellable(&self, now: OffsetDateTime) -> bool {
        now >= self.sale_start && now < self.cancel_until
    }

    /// Until when the event's cache is needed: the sale, and after it the cancellation window
    /// (a returned number is handed out by the cache).
    pub fn active_until(&self) -> OffsetDateTime {
        self.sale_end.max(self.cancel_until)
    }

    /// When the door lets tickets in: the organiser's `check_in_from`/`check_in_until`, by default
    /// from [`CHECK_IN_BEFORE`] before `starts_at` to [`CHECK_IN_AFTER`] after it; an event without
    /// `starts_at` from its sale's start, with no end unless set.
    pub fn check_in_window(&self) -> (OffsetDateTime, Option<OffsetDateTime>) {
        let from = self.check_in_from.or(self.starts_at.map(|t| t - CHECK_IN_BEFORE)).unwrap_or(self.sale_start);
        let until = self.check_in_until.or(self.starts_at.map(|t| t + CHECK_IN_AFTER));
        (from, until)
    }
}

pub fn phase(now: OffsetDateTime, start: OffsetDateTime, end: OffsetDateTime) -> SalePhase {
    if now < start {
        SalePhase::NotStarted
    } else if now >= end {
        SalePhase::Ended
    } else {
        SalePhase::Open
    }
}

/// Epoch milliseconds, the unit of every time inside Redis.
pub fn epoch_ms(t: OffsetDateTime) -> i64 {
    (t.unix_timestamp_nanos() / 1_000_000) as i64
}

pub fn from_epoch_ms(ms: i64) -> Option<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).ok()
}

pub fn rfc3339(t: OffsetDateTime) -> String {
    // Formatting a UTC OffsetDateTime as RFC 3339 cannot fail for years 0..9999.
    t.format(&Rfc3339).unwrap_or_default()
}

/// One thing wrong with a release request, named by its field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldProblem {
    pub field: String,
    pub problem: String,
}

/// Everything wrong with a release request, so an organiser fixes it in one go.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", describe(.0))]
pub struct InvalidEvent(pub Vec<FieldProblem>);

fn describe(problems: &[FieldProblem]) -> String {
    problems.iter().map(|p| format!("{}: {}", p.field, p.problem)).collect::<Vec<_>>().join("; ")
}

/// A release request as the organiser wrote it, checked field by field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventDraft {
    pub id: Option<EventId>,
    pub title: String,
    pub capacity: u32,
    pub sale_start: OffsetDateTime,
    pub sale_end: OffsetDateTime,
    pub venue: Option<String>,
    pub starts_at: Option<OffsetDateTime>,
    pub description: Option<String>,
    pub cancel_until: Option<OffsetDateTime>,
    pub waitlist_size: Option<u32>,
    pub check_in_from: Option<OffsetDateTime>,
    pub check_in_until: Option<OffsetDateTime>,
    pub expected_rate: Option<u32>,
    pub buckets: Option<u16>,
    /// The red packets' total (in the currency's smallest unit) and currency, both or neither.
    pub red_packet: Option<(u64, Currency)>,
    /// How the tickets are handed out, and a draw's terms (for a ballot, a fair open).
    pub sale_mode: SaleMode,
    pub draw: Option<DrawTerms>,
    /// A fair open's pre-queue.
    pub queue: Option<QueueTerms>,
}

const FIELDS: [&str; 23] = [
    "id",
    "title",
    "capacity",
    "sale_start",
    "sale_end",
    "venue",
    "starts_at",
    "description",
    "cancel_until",
    "waitlist_size",
    "check_in_from",
    "check_in_until",
    "expected_rate",
    "buckets",
    "total_amount",
    "currency",
    "sale_mode",
    "draw_commitment",
    "draw_beacon",
    "entries_close",
    "queue_opens",
    "admission_rate",
    "proof_of_work_bits",
];

struct Fields<'a> {
    object: &'a Map<String, Value>,
    problems: Vec<FieldProblem>,
}

impl<'a> Fields<'a> {
    fn problem(&mut self, field: &str, problem: impl Into<String>) {
        self.problems.push(FieldProblem { field: field.to_owned(), problem: problem.into() });
    }

    /// A single-line text: no control character at all (a title goes into a mail's subject line).
    fn text(&mut self, field: &str, required: bool, max: usize) -> Option<String> {
        self.text_lines(field, required, max, false)
    }

    fn text_lines(&mut self, field: &str, required: bool, max: usize, multiline: bool) -> Option<String> {
        match self.object.get(field) {
            None | Some(Value::Null) => {
                if required {
                    self.problem(field, "is required");
                }
                None
            }
            Some(Value::String(s)) if s.trim().is_empty() => {
                self.problem(field, "must not be blank");
                None
            }
            Some(Value::String(s)) if s.chars().count() > max => {
                self.problem(field, format!("must be at most {max} characters"));
                None
            }
            Some(Value::String(s)) if s.chars().any(|c| c.is_control() && !(multiline && c == '\n')) => {
                let what = if multiline {
                    "control characters other than line breaks"
                } else {
                    "control characters or line breaks"
                };
                self.problem(field, format!("must not contain {what}"));
                None
            }
            Some(Value::String(s)) => Some(s.trim().to_owned()),
            Some(_) => {
                self.problem(field, "must be a string");
                None
            }
        }
    }

    /// A whole number from `min` to [`MAX_CAPACITY`] (a capacity, a waitlist's size).
    fn count(&mut self, field: &str, min: u32, required: bool) -> Option<u32> {
        self.whole(field, min, MAX_CAPACITY, required)
    }

    /// A whole number from `min` to `max`.
    fn whole(&mut self, field: &str, min: u32, max: u32, required: bool) -> Option<u32> {
        match self.object.get(field) {
            None | Some(Value::Null) => {
                if required {
                    self.problem(field, "is required");
                }
                None
            }
            Some(v) => match v.as_u64() {
                Some(n) if (u64::from(min)..=u64::from(max)).contains(&n) => Some(n as u32),
                _ => {
                    self.problem(field, format!("must be a whole number from {min} to {max}"));
                    None
                }
            },
        }
    }

    /// A red packets' total: a whole number of the smallest unit, at most [`red_packet::MAX_TOTAL`].
    fn amount(&mut self, field: &str) -> Option<u64> {
        match self.object.get(field) {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_u64() {
                Some(n) if (1..=red_packet::MAX_TOTAL).contains(&n) => Some(n),
                _ => {
                    self.problem(
                        field,
                        format!(
                            "must be a whole number of the currency's smallest unit, from 1 to {}",
                            red_packet::MAX_TOTAL
                        ),
                    );
                    None
                }
            },
        }
    }

    /// `sale_mode`, and the draw's `draw_commitment` and optional `draw_beacon` (`{public_key,
    /// round}`), which only a mode that draws takes (a ballot, a fair open).
    fn sale_mode(&mut self) -> (SaleMode, Option<DrawTerms>) {
        let mode = match self.object.get("sale_mode") {
            None | Some(Value::Null) => SaleMode::FirstCome,
            Some(Value::String(s)) if SaleMode::parse(s).is_some() => SaleMode::parse(s).unwrap_or_default(),
            Some(_) => {
                self.problem("sale_mode", format!("must be one of {}", SaleMode::NAMES.join(", ")));
                return (SaleMode::FirstCome, None);
            }
        };
        let draws = mode != SaleMode::FirstCome;
        let commitment = self.text("draw_commitment", draws, 64);
        let beacon = match self.object.get("draw_beacon") {
            None | Some(Value::Null) => None,
            Some(v) => match serde_json::from_value::<BeaconRound>(v.clone()) {
                Ok(round) => Some(round),
                Err(_) => {
                    self.problem("draw_beacon", "must be an object with public_key (hex) and round (a whole number)");
                    return (mode, None);
                }
            },
        };
        if !draws {
            for field in ["draw_commitment", "draw_beacon", "entries_close", "proof_of_work_bits"] {
                if self.object.get(field).is_some_and(|v| !v.is_null()) {
                    self.problem(field, "is for a sale that draws only (sale_mode: ballot or fair_open)");
                }
            }
            return (mode, None);
        }
        let work = self.whole("proof_of_work_bits", 1, super::proof_of_work::MAX_BITS, false);
        let close = self.instant("entries_close", false);
        let Some(commitment) = commitment else { return (mode, None) };
        match DrawTerms::new(&commitment, beacon) {
            Ok(terms) => (mode, Some(DrawTerms { proof_of_work_bits: work, entries_close: close, ..terms })),
            Err((field, problem)) => {
                self.problem(field, problem);
                (mode, None)
            }
        }
    }

    /// A fair open's pre-queue: `queue_opens` (required) and `admission_rate` (users admitted per
    /// second; the capacity by default), which only a fair open takes.
    fn queue(&mut self, mode: SaleMode, capacity: Option<u32>) -> Option<QueueTerms> {
        let opens = self.instant("queue_opens", mode == SaleMode::FairOpen);
        let rate = self.whole("admission_rate", 1, MAX_ADMISSION_RATE, false);
        if mode != SaleMode::FairOpen {
            for field in ["queue_opens", "admission_rate"] {
                if self.object.get(field).is_some_and(|v| !v.is_null()) {
                    self.problem(field, "is for a fair open only (sale_mode: fair_open)");
                }
            }
            return None;
        }
        Some(QueueTerms { opens: opens?, admission_rate: rate.or(capacity)?.min(MAX_ADMISSION_RATE) })
    }

    fn instant(&mut self, field: &str, required: bool) -> Option<OffsetDateTime> {
        let text = self.text(field, required, 64)?;
        match OffsetDateTime::parse(&text, &Rfc3339) {
            Ok(t) => Some(t.to_offset(time::UtcOffset::UTC)),
            Err(_) => {
                self.problem(field, "must be an RFC 3339 time such as 2026-12-01T09:00:00Z");
                None
            }
        }
    }
}

impl EventDraft {
    /// Reads a release request, naming every field that is missing, of the wrong type or unknown.
    pub fn from_json(value: &Value) -> Result<Self, InvalidEvent> {
        let Some(object) = value.as_object() else {
            return Err(InvalidEvent(vec![FieldProblem {
                field: "(body)".into(),
                problem: "must be a JSON object with title, capacity, sale_start and sale_end".into(),
            }]));
        };
        let mut f = Fields { object, problems: Vec::new() };
        for key in object.keys() {
            if !FIELDS.contains(&key.as_str()) {
                f.problem(key, format!("is not a known field (known: {})", FIELDS.join(", ")));
            }
        }
        let id = f.text("id", false, EventId::MAX_LEN + 1).and_then(|s| match EventId::parse(&s) {
            Ok(id) => Some(id),
            Err(e) => {
                f.problem("id", e.to_string());
                None
            }
        });
        let title = f.text("title", true, MAX_TITLE);
        let capacity = f.count("capacity", 1, true);
        let waitlist_size = f.count("waitlist_size", 0, false);
        let sale_start = f.instant("sale_start", true);
        let sale_end = f.instant("sale_end", true);
        let venue = f.text("venue", false, MAX_TITLE);
        let starts_at = f.instant("starts_at", false);
        let description = f.text_lines("description", false, MAX_TEXT, true);
        let cancel_until = f.instant("cancel_until", false);
        let check_in_from = f.instant("check_in_from", false);
        let check_in_until = f.instant("check_in_until", false);
        let expected_rate = f.whole("expected_rate", 1, MAX_EXPECTED_RATE, false);
        let buckets = f.whole("buckets", 1, u32::from(MAX_BUCKETS), false).map(|n| n as u16);
        let total_amount = f.amount("total_amount");
        let currency = f.text("currency", false, 3).and_then(|c| match Currency::parse(&c) {
            Ok(c) => Some(c),
            Err(e) => {
                f.problem("currency", e.to_string());
                None
            }
        });
        let given = |field: &str| object.get(field).is_some_and(|v| !v.is_null());
        let red_packet = match (total_amount, currency) {
            (Some(total), Some(currency)) => Some((total, currency)),
            (None, None) => None,
            (Some(_), None) if !given("currency") => {
                f.problem("currency", "is required with total_amount");
                None
            }
            (None, Some(_)) if !given("total_amount") => {
                f.problem("total_amount", "is required with currency");
                None
            }
            _ => None,
        };
        let (sale_mode, draw) = f.sale_mode();
        let queue = f.queue(sale_mode, capacity);
        match (title, capacity, sale_start, sale_end) {
            (Some(title), Some(capacity), Some(sale_start), Some(sale_end)) if f.problems.is_empty() => Ok(Self {
                id,
                title,
                capacity,
                sale_start,
                sale_end,
                venue,
                starts_at,
                description,
                cancel_until,
                waitlist_size,
                check_in_from,
                check_in_until,
                expected_rate,
                buckets,
                red_packet,
                sale_mode,
                draw,
                queue,
            }),
            _ => Err(InvalidEvent(f.problems)),
        }
    }

    /// Checks the rules between fields and stamps the event. `now` is the release time.
    pub fn into_event(self, now: OffsetDateTime) -> Result<Event, InvalidEvent> {
        let mut problems = Vec::new();
        if self.sale_end <= self.sale_start {
            problems.push(FieldProblem { field: "sale_end".into(), problem: "must be after sale_start".into() });
        } else if self.sale_end - self.sale_start > MAX_SALE_LENGTH {
            problems.push(FieldProblem { field: "sale_end".into(), problem: "a sale may last at most 90 days".into() });
        }
        if self.sale_end <= now {
            problems.push(FieldProblem { field: "sale_end".into(), problem: "is already in the past".into() });
        }
        let cancel_until = self.cancel_until.unwrap_or(self.sale_end);
        if cancel_until < self.sale_start {
            problems
                .push(FieldProblem { field: "cancel_until".into(), problem: "must not be before sale_start".into() });
        } else if cancel_until - self.sale_end > MAX_SALE_LENGTH {
            problems.push(FieldProblem {
                field: "cancel_until".into(),
                problem: "may be at most 90 days after sale_end".into(),
            });
        }
        if let Some((total, _)) = &self.red_packet
            && *total < u64::from(self.capacity)
        {
            problems.push(FieldProblem {
                field: "total_amount".into(),
                problem: format!(
                    "must be at least the capacity ({}): every red packet holds one unit or more",
                    self.capacity
                ),
            });
        }
        if let (Some(from), Some(until)) = (self.check_in_from, self.check_in_until)
            && until <= from
        {
            problems
                .push(FieldProblem { field: "check_in_until".into(), problem: "must be after check_in_from".into() });
        }
        if let Some(queue) = &self.queue
            && queue.opens >= self.sale_start
        {
            problems.push(FieldProblem { field: "queue_opens".into(), problem: "must be before sale_start".into() });
        }
        if let Some(close) = self.draw.as_ref().and_then(|d| d.entries_close) {
            let problem = if close > self.sale_start {
                Some("must be at or before sale_start: the draw is not before it")
            } else if self.sale_mode == SaleMode::FairOpen && close != self.sale_start {
                Some("is sale_start for a fair open: its queue is shuffled at the open, later joins queue behind")
            } else if close <= now {
                Some("is already in the past: nobody could enter")
            } else {
                None
            };
            if let Some(problem) = problem {
                problems.push(FieldProblem { field: "entries_close".into(), problem: problem.into() });
            }
        }
        if self.sale_mode == SaleMode::Ballot && self.expected_rate.is_some() {
            problems.push(FieldProblem {
                field: "expected_rate".into(),
                problem: "a ballot has no open to warm a fleet for: its draw hands the tickets out".into(),
            });
        }
        let buckets = self.buckets.unwrap_or(1);
        if buckets > 1 {
            // A draw's one order (a ballot's, a fair open's) would span the buckets.
            if self.sale_mode != SaleMode::FirstCome {
                problems.push(FieldProblem {
                    field: "buckets".into(),
                    problem: "only a first_come sale splits its numbers over buckets".into(),
                });
            }
            if u32::from(buckets) > self.capacity {
                problems.push(FieldProblem {
                    field: "buckets".into(),
                    problem: "must not exceed the capacity: every bucket starts with a number".into(),
                });
            }
        }
        if !problems.is_empty() {
            return Err(InvalidEvent(problems));
        }
        Ok(Event {
            id: self.id.unwrap_or_else(EventId::generate),
            title: self.title,
            capacity: self.capacity,
            sale_start: self.sale_start,
            sale_end: self.sale_end,
            venue: self.venue,
            starts_at: self.starts_at,
            description: self.description,
            cancel_until,
            waitlist_size: self.waitlist_size.unwrap_or(self.capacity),
            check_in_from: self.check_in_from,
            check_in_until: self.check_in_until,
            expected_rate: self.expected_rate,
            buckets,
            // The seed is drawn here, once: a retried release keeps the first (`same_release`).
            red_packet: self.red_packet.map(|(total, currency)| RedPacket {
                total,
                currency,
                seed: AmountSeed::generate(),
            }),
            sale_mode: self.sale_mode,
            // Fixed here: entries close at sale_start unless the organiser closed them earlier.
            draw: self.draw.map(|d| DrawTerms { entries_close: Some(d.entries_close.unwrap_or(self.sale_start)), ..d }),
            queue: self.queue,
            created_at: now,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2026-11-22 10:00 UTC);

    fn fields(err: InvalidEvent) -> Vec<String> {
        err.0.into_iter().map(|p| p.field).collect()
    }

    #[test]
    fn a_complete_request_becomes_an_event() {
        let draft = EventDraft::from_json(&json!({
            "id": "lecture-1", "title": " Rust on Lambda ", "capacity": 100,
            "sale_start": "2026-11-22T12:00:00+02:00", "sale_end": "2026-11-22T11:00:00Z",
            "venue": "Hall A"
        }))
        .unwrap();
        let event = draft.into_event(NOW).unwrap();
        assert_eq!(event.id.as_str(), "lecture-1");
        assert_eq!(event.title, "Rust on Lambda");
        assert_eq!(event.sale_start, datetime!(2026-11-22 10:00 UTC));
        assert_eq!(event.sale_phase(NOW), SalePhase::Open);
        assert_eq!(event.created_at, NOW);
    }

    #[test]
    fn every_wrong_field_is_named_at_once() {
        let err = EventDraft::from_json(&json!({
            "title": 5, "capacity": 0, "sale_start": "tomorrow", "colour": "red"
        }))
        .unwrap_err();
        assert_eq!(fields(err), ["colour", "title", "capacity", "sale_start", "sale_end"]);
    }

    /// Any JSON at all: no panic, and either a draft whose fields hold the release rules or an error
    /// naming at least one field.
    fn any_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(|f| json!(f)),
            "\\PC{0,40}".prop_map(Value::from),
            Just(json!("2026-12-01T09:00:00Z")),
        ];
        leaf.prop_recursive(3, 40, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                proptest::collection::btree_map(
                    prop_oneof![
                        Just("title".to_owned()),
                        Just("capacity".to_owned()),
                        Just("sale_start".to_owned()),
                        Just("sale_end".to_owned()),
                        Just("id".to_owned()),
                        Just("venue".to_owned()),
                        "\\PC{0,10}"
                    ],
                    inner,
                    0..8
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2_000))]
        #[test]
        fn any_json_is_a_draft_within_the_rules_or_names_a_field(body in any_json()) {
            match EventDraft::from_json(&body) {
                Ok(draft) => {
                    proptest::prop_assert!((1..=MAX_CAPACITY).contains(&draft.capacity));
                    proptest::prop_assert!(!draft.title.is_empty() && !draft.title.chars().any(char::is_control));
                }
                Err(InvalidEvent(problems)) => proptest::prop_assert!(!problems.is_empty()),
            }
        }
    }

    #[test]
    fn a_line_break_or_control_character_is_refused_in_every_single_line_field() {
        let base = json!({"title": "t", "capacity": 1, "sale_start": "2026-12-01T09:00:00Z", "sale_end": "2026-12-01T10:00:00Z"});
        for (field, bad) in
            [("title", "Rust\r\nBcc: x@y.z"), ("title", "a\u{7}b"), ("venue", "Hall\nA"), ("description", "a\u{0}b")]
        {
            let mut body = base.clone();
            body[field] = json!(bad);
            let err = EventDraft::from_json(&body).unwrap_err();
            assert_eq!(err.0.iter().map(|p| p.field.as_str()).collect::<Vec<_>>(), [field], "{bad:?}");
        }
        let mut body = base.clone();
        body["description"] = json!("line one\nline two");
        assert_eq!(EventDraft::from_json(&body).unwrap().description.as_deref(), Some("line one\nline two"));
    }

    #[test]
    fn buckets_split_a_first_come_sale_only_with_its_waitlist() {
        let release = |extra: Value| {
            let mut body = json!({"title": "t", "capacity": 1000, "sale_start": "2026-11-22T12:00:00Z", "sale_end": "2026-11-22T13:00:00Z"});
            body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            EventDraft::from_json(&body).and_then(|d| d.into_event(NOW))
        };
        let sharded = release(json!({"buckets": 3})).unwrap();
        assert_eq!((sharded.buckets, sharded.waitlist_size), (3, 1000), "a waitlist as long as unsharded");
        let waiting = release(json!({"buckets": 3, "waitlist_size": 10})).unwrap();
        assert_eq!((waiting.buckets, waiting.waitlist_size), (3, 10));
        let plain = release(json!({})).unwrap();
        assert_eq!((plain.buckets, plain.waitlist_size), (1, 1000));
        assert_eq!(release(json!({"buckets": 1, "waitlist_size": 5})).unwrap().buckets, 1);
        for (bad, field) in [
            (json!({"buckets": 0}), "buckets"),
            (json!({"buckets": 17}), "buckets"),
            (json!({"buckets": "3"}), "buckets"),
            (json!({"buckets": 3, "sale_mode": "ballot", "draw_commitment": "00".repeat(32)}), "buckets"),
            (json!({"buckets": 3, "capacity": 2}), "buckets"),
        ] {
            let err = release(bad.clone()).unwrap_err();
            assert_eq!(fields(err), [field], "{bad}");
        }
    }

    #[test]
    fn a_ballot_released_again_is_the_same_release_wherever_its_entries_are_kept() {
        let ballot = EventDraft::from_json(&json!({
            "title": "t", "capacity": 10, "sale_mode": "ballot", "draw_commitment": "00".repeat(32),
            "sale_start": "2026-11-22T12:00:00Z", "sale_end": "2026-11-22T13:00:00Z"
        }))
        .and_then(|d| d.into_event(NOW))
        .unwrap();
        assert_eq!(ballot.entry_shards(), super::super::sale_mode::EntryShards::CURRENT, "released now: spread");
        // Stored before the entries were spread: the same definition is the same release.
        let mut stored = ballot.clone();
        stored.draw.as_mut().unwrap().entry_shards = super::super::sale_mode::EntryShards::ONE;
        assert!(stored.same_release(&ballot));
        let mut other = ballot.clone();
        other.capacity = 11;
        assert!(!stored.same_release(&other), "another definition is not");
    }

    #[test]
    fn capacity_is_bounded() {
        for bad in [json!(0), json!(-1), json!(1.5), json!("10"), json!(MAX_CAPACITY + 1)] {
            let err = EventDraft::from_json(&json!({
                "title": "t", "capacity": bad, "sale_start": "2026-11-22T10:00:00Z", "sale_end": "2026-11-22T11:00:00Z"
            }))
            .unwrap_err();
            assert_eq!(fields(err), ["capacity"], "capacity {bad}");
        }
    }

    #[test]
    fn the_window_must_be_ordered_and_not_over() {
        let draft = |start: &str, end: &str| {
            EventDraft::from_json(&json!({"title": "t", "capacity": 1, "sale_start": start, "sale_end": end})).unwrap()
        };
        assert!(draft("2026-11-22T11:00:00Z", "2026-11-22T11:00:00Z").into_event(NOW).is_err());
        assert!(draft("2026-11-22T08:00:00Z", "2026-11-22T09:00:00Z").into_event(NOW).is_err());
        assert!(draft("2026-11-22T11:00:00Z", "2027-11-22T11:00:00Z").into_event(NOW).is_err());
    }

    #[test]
    fn a_payload_that_is_not_an_object_says_what_is_expected() {
        let err = EventDraft::from_json(&json!([1, 2])).unwrap_err();
        assert!(err.to_string().contains("title, capacity, sale_start and sale_end"));
    }

    #[test]
    fn phases_use_a_half_open_window() {
        let (s, e) = (datetime!(2026-11-22 10:00 UTC), datetime!(2026-11-22 11:00 UTC));
        assert_eq!(phase(s - Duration::milliseconds(1), s, e), SalePhase::NotStarted);
        assert_eq!(phase(s, s, e), SalePhase::Open);
        assert_eq!(phase(e, s, e), SalePhase::Ended);
        assert_eq!(from_epoch_ms(epoch_ms(s)), Some(s));
    }
}
