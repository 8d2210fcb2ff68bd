//! The organiser's audit: counts, and the invariants of docs/DESIGN.md section 13 computed from the
//! stored orders, each with pass or fail. Pure: the caller reads the orders.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::{
    EventId, OrderId, OrderStatus, TicketNo, UserId,
    red_packet::{ALGORITHM, Currency, RedPacket},
};

/// One stored order, as the audit needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRow {
    pub ticket_no: TicketNo,
    pub order_id: OrderId,
    pub user_id: UserId,
    pub status: OrderStatus,
    /// The confirmation mail went out (`mail_status` `SENT`).
    pub mailed: bool,
    pub promoted: bool,
    pub checked_in: bool,
    /// Offline admissions of its pass after it was already checked in (another door's).
    pub check_in_conflicts: u32,
}

/// Where each ticket number is besides the orders: the ticket items, the numbers whose give-back
/// is pending (return markers), and what the cache holds when it is there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ledger {
    /// Ticket items: number -> the order id that holds it.
    pub tickets: HashMap<TicketNo, OrderId>,
    /// Numbers of cancelled orders whose give-back has not run (`RETURN#` markers).
    pub give_backs_pending: Vec<TicketNo>,
    /// The cache, read in one step; `None` when it is not there (expired after the event, or lost).
    pub cache: Option<CacheView>,
    /// The exact rebuilds of the cache (`REBUILD#` items), oldest first.
    pub rebuilds: Vec<RebuildRecord>,
}

/// One exact rebuild of the cache, as recorded before it laid anything down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RebuildRecord {
    /// When it read the outboxes and DynamoDB (epoch ms), every bucket stopped.
    pub read_ms: i64,
    /// Orders still on the queue then: more than 0 only when it stopped waiting for them
    /// (`REBUILD_MAX_WAIT_SECONDS`), the one documented way a `202` ends `REJECTED`; `None` when
    /// the queue's depth could not be read (counted as orders in flight).
    pub in_flight: Option<u64>,
    /// Numbers it found free beside waiting users during the sale (the cache had lost them, and
    /// the crowd had been told the sale sold out) and handed to the line: promotions that no
    /// cancellation made.
    pub promoted_free: u64,
}

impl RebuildRecord {
    /// It read while orders may still have been on their way to DynamoDB.
    pub fn gave_up(&self) -> bool {
        self.in_flight != Some(0)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheView {
    /// Numbers on sale.
    pub on_sale: Vec<TicketNo>,
    /// Numbers returned after the sale's end, held for the waitlist.
    pub returned: Vec<TicketNo>,
    /// Orders in the outbox: order id and number (stored ones among them are counted once).
    pub outbox: Vec<(OrderId, TicketNo)>,
    /// Users waiting.
    pub waiting: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub passed: bool,
    pub detail: String,
    /// Nothing to check yet (a draw not drawn): passed, and shown as waiting, not as a pass.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub pending: bool,
}

/// An order decided (`202`) and not yet stored this long is late (the organiser's page turns
/// amber) ...
pub const ORDER_LATE_AFTER: std::time::Duration = std::time::Duration::from_secs(10);
/// ... and this long, with nothing stored for as long, stuck: reconcile has sent it again by then
/// (orders older than `RECONCILE_OUTBOX_AGE_SECONDS`, 30 s, each minute: 30 to 90 s), so the
/// consumer or DynamoDB is failing. The audit's check fails. The default of
/// `ORDER_STUCK_AFTER_SECONDS` (query).
pub const ORDER_STUCK_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    pub event_id: EventId,
    pub capacity: u32,
    pub confirmed: u64,
    pub rejected: u64,
    pub cancelled: u64,
    /// Orders that went to a user from the waitlist (any status now).
    pub promoted: u64,
    pub checked_in: u64,
    /// Passes a door let in offline when another door had already checked them in: the same pass
    /// in at two doors (docs/DESIGN.md section 11), each pass counted once however many doors or
    /// syncs. Counted, not a failed check: an offline door cannot know, and the organiser decides
    /// what to do.
    pub check_in_conflicts: u64,
    /// Check-ins by the door that made them, as its staff named it ("(no door named)" for a door
    /// that gave none): which gates are busy.
    pub check_ins_by_door: std::collections::BTreeMap<String, u64>,
    /// Confirmation mails sent (cancelled orders whose mail went out before they were cancelled
    /// count too: the mail was sent).
    pub mails_sent: u64,
    /// Users on the waitlist now, when the cache could say.
    pub waiting: Option<u64>,
    /// Numbers no confirmed order holds and none is on its way to (no order in the outbox, no
    /// give-back pending): after `cancel_until`, the tickets that went unsold.
    pub unsold: u64,
    /// Of those, numbers returned after the sale's end and held for the waitlist, when the cache
    /// could say (nobody joined to take them).
    pub returned_unclaimed: Option<u64>,
    /// A red-packet event's amounts: the total, and what the confirmed orders hold.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub red_packet: Option<RedPacketSums>,
    pub checks: Vec<Check>,
    /// Every check passed.
    pub passed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RedPacketSums {
    pub total: u64,
    pub currency: Currency,
    /// The amounts of the numbers confirmed orders hold, added up.
    pub held: u64,
    pub algorithm: &'static str,
}

impl Report {
    /// The red packets' section and check `red_packet_amounts`: the split recomputed from the seed
    /// gives every number at least one unit and sums to the total exactly, and the amounts the
    /// confirmed orders hold sum to at most the total.
    pub fn with_red_packet(mut self, packet: &RedPacket, rows: &[AuditRow]) -> Self {
        let split = packet.split(self.capacity);
        let all: u128 = split.iter().map(|a| u128::from(*a)).sum();
        let smallest = split.iter().copied().min().unwrap_or(0);
        let held: u64 = rows
            .iter()
            .filter(|r| r.status == OrderStatus::Confirmed)
            .filter_map(|r| split.get((r.ticket_no.get() as usize).checked_sub(1)?))
            .sum();
        let passed = split.len() == self.capacity as usize
            && all == u128::from(packet.total)
            && smallest >= 1
            && held <= packet.total;
        self.checks.push(Check {
            name: "red_packet_amounts",
            passed,
            detail: format!(
                "{} amounts summing to {all} of {} (the smallest {smallest}); confirmed orders hold {held}",
                split.len(),
                packet.total
            ),
            pending: false,
        });
        self.red_packet =
            Some(RedPacketSums { total: packet.total, currency: packet.currency.clone(), held, algorithm: ALGORITHM });
        self.passed = self.checks.iter().all(|c| c.passed);
        self
    }
}

/// A complete draw as the audit checks a sale against it: recomputed from the draw's roll and
/// the revealed secret (a draw that does not is no draw: the view answers `503`), its algorithm,
/// how many it shuffled, and the users of its first places in order (the winners and as many
/// waiting places as it laid down: a private draw publishes leaves, not users).
#[derive(Debug, Clone)]
pub struct DrawnOrder<'a> {
    pub algorithm: &'a str,
    pub entrants: usize,
    pub first: Vec<&'a UserId>,
}

impl Report {
    /// A ballot's check `ballot_draw`: the draw, recomputed from the draw's roll and the
    /// revealed secret (`drawn`; `None` until the draw is complete), decided who holds and who
    /// waits. Every order not from the waitlist belongs to one of the first `capacity` of the
    /// draw's order, every order from the waitlist to one after them; every winner's order is
    /// stored or still on its way (orders in the outbox `ledger` read); every durable waiting place
    /// `p` is the entrant at `capacity + p` in the draw's order.
    pub fn with_draw(
        mut self,
        drawn: Option<DrawnOrder<'_>>,
        rows: &[AuditRow],
        places: &[(UserId, u64)],
        ledger: &Ledger,
    ) -> Self {
        let Some(DrawnOrder { algorithm, entrants, first: users }) = drawn else {
            self.checks.push(Check {
                name: "ballot_draw",
                passed: true,
                detail: "not drawn yet".into(),
                pending: true,
            });
            return self;
        };
        let capacity = (self.capacity as usize).min(entrants);
        let position: HashMap<&str, usize> = users.iter().enumerate().map(|(i, u)| (u.as_str(), i)).collect();
        let won = |u: &UserId| position.get(u.as_str()).is_some_and(|&i| i < capacity);
        let lost = |u: &UserId| position.get(u.as_str()).is_some_and(|&i| i >= capacity);
        let (promoted, drawn_orders): (Vec<&AuditRow>, Vec<&AuditRow>) = rows.iter().partition(|r| r.promoted);
        let strangers = drawn_orders.iter().filter(|r| !won(&r.user_id)).count()
            + promoted.iter().filter(|r| !lost(&r.user_id)).count();
        let winners_stored: HashSet<&UserId> = drawn_orders.iter().map(|r| &r.user_id).filter(|u| won(u)).collect();
        let missing = capacity.saturating_sub(winners_stored.len());
        let in_flight = in_flight(rows, ledger).len();
        let misplaced = places
            .iter()
            .filter(|(user, place)| {
                let at = (capacity + *place as usize).checked_sub(1);
                at.and_then(|i| users.get(i)).map(|u| u.as_str()) != Some(user.as_str())
            })
            .count();
        let passed = strangers == 0 && missing <= in_flight && misplaced == 0;
        self.checks.push(Check {
            name: "ballot_draw",
            passed,
            detail: format!(
                "{entrants} entrants, {capacity} drawn to win ({algorithm}, recomputed from the draw's roll): {} hold a stored order, {missing} \
                 not stored yet ({in_flight} orders on their way); {strangers} orders outside the draw's outcome; \
                 {} waiting places, {misplaced} out of draw order",
                winners_stored.len(),
                places.len()
            ),
            pending: false,
        });
        self.passed = self.checks.iter().all(|c| c.passed);
        self
    }
}

impl Report {
    /// A fair open's check `fair_open_draw`: the queue's draw, recomputed from the draw's roll
    /// and the revealed secret, is the one published (`None` until the draw is complete). Who
    /// then won is the grab script's, among those admitted in that order.
    pub fn with_queue_draw(mut self, drawn: Option<DrawnOrder<'_>>) -> Self {
        let (passed, detail) = match &drawn {
            None => (true, "not drawn yet".to_owned()),
            Some(d) => (true, format!("{} entrants shuffled by {}; it recomputes", d.entrants, d.algorithm)),
        };
        let pending = drawn.is_none();
        self.checks.push(Check { name: "fair_open_draw", passed, detail, pending });
        self.passed = self.checks.iter().all(|c| c.passed);
        self
    }

    /// Check `orders_stored_in_time`: no order decided (`202`) waits to be stored longer than
    /// [`ORDER_STUCK_AFTER`] while nothing is stored either. `oldest` is the oldest waiting
    /// order's age (`None` when none waits, or the cache could not say: the cache's own check
    /// says so); `since_store` how long ago an order was last stored. A big sale's drain takes
    /// minutes (SES sends some 14 mails a second by default) and its oldest order waits long, but
    /// orders are stored all along: that is a drain, not a stop.
    pub fn with_orders_in_time(
        mut self,
        oldest: Option<std::time::Duration>,
        since_store: Option<std::time::Duration>,
        consumer_since: Option<std::time::Duration>,
        stuck_after: std::time::Duration,
    ) -> Self {
        let moving = since_store.is_some_and(|s| s < stuck_after);
        // The consumer stores other sales' orders: this one's wait behind them on the shared queue.
        let queued = consumer_since.is_some_and(|s| s < stuck_after);
        let (passed, detail) = match oldest {
            None => (true, "no order waits to be stored".to_owned()),
            Some(age) if age < stuck_after => {
                (true, format!("the oldest order waiting to be stored is {} s old", age.as_secs()))
            }
            Some(age) if moving => (
                true,
                format!(
                    "the oldest order waiting to be stored is {} s old; orders are being stored (the last {} s ago)",
                    age.as_secs(),
                    since_store.unwrap_or_default().as_secs()
                ),
            ),
            Some(age) if queued => (
                true,
                format!(
                    "the oldest order waiting to be stored is {} s old, behind other sales' orders on the shared queue (the consumer stored one {} s ago)",
                    age.as_secs(),
                    consumer_since.unwrap_or_default().as_secs()
                ),
            ),
            Some(age) => (
                false,
                format!(
                    "an order has waited {} s to be stored and none was stored for over {} s: the mail consumer or DynamoDB is failing",
                    age.as_secs(),
                    stuck_after.as_secs()
                ),
            ),
        };
        self.checks.push(Check { name: "orders_stored_in_time", passed, detail, pending: false });
        self.passed = self.checks.iter().all(|c| c.passed);
        self
    }
}

pub fn report(event: &EventId, capacity: u32, rows: &[AuditRow], ledger: &Ledger) -> Report {
    let count = |f: &dyn Fn(&AuditRow) -> bool| rows.iter().filter(|r| f(r)).count() as u64;
    let confirmed: Vec<&AuditRow> = rows.iter().filter(|r| r.status == OrderStatus::Confirmed).collect();
    let in_flight = in_flight(rows, ledger);

    let mut numbers = HashSet::new();
    let twice: Vec<TicketNo> = confirmed.iter().filter(|r| !numbers.insert(r.ticket_no)).map(|r| r.ticket_no).collect();
    let out_of_range = confirmed.iter().filter(|r| r.ticket_no.get() == 0 || r.ticket_no.get() > capacity).count();
    let unmailed = confirmed.iter().filter(|r| !r.mailed).count();
    let promoted = rows.iter().filter(|r| r.promoted && r.status != OrderStatus::Rejected).count();
    let cancelled = count(&|r| r.status == OrderStatus::Cancelled);

    let mut checks = vec![
        Check {
            name: "no_ticket_number_twice",
            passed: twice.is_empty(),
            detail: if twice.is_empty() {
                format!("{} confirmed orders hold {} distinct numbers", confirmed.len(), numbers.len())
            } else {
                format!("numbers held twice: {twice:?}")
            },
            pending: false,
        },
        Check {
            name: "held_within_capacity",
            passed: confirmed.len() as u64 <= u64::from(capacity) && out_of_range == 0,
            detail: format!("{} held of {capacity}; {out_of_range} numbers outside 1..{capacity}", confirmed.len()),
            pending: false,
        },
        accounted(capacity, &confirmed, &in_flight, ledger),
        {
            let found = ledger.rebuilds.iter().map(|r| r.promoted_free).sum::<u64>();
            Check {
                name: "promotions_within_cancellations",
                passed: promoted as u64 <= cancelled + found,
                detail: format!(
                    "{promoted} orders from the waitlist, {cancelled} cancellations, {found} numbers a rebuild \
                     found lost and handed to the line"
                ),
                pending: false,
            }
        },
        tickets_agree(&confirmed, &ledger.tickets),
        no_order_rejected(rows, &ledger.rebuilds),
        Check {
            name: "every_confirmed_order_mailed",
            passed: unmailed == 0,
            detail: format!(
                "{unmailed} confirmed orders without a sent mail (a few are normal while the queue drains)"
            ),
            pending: false,
        },
    ];
    checks.shrink_to_fit();
    let on_the_way = confirmed.len() + in_flight.len() + ledger.give_backs_pending.len();
    Report {
        event_id: event.clone(),
        capacity,
        confirmed: confirmed.len() as u64,
        rejected: count(&|r| r.status == OrderStatus::Rejected),
        cancelled,
        promoted: count(&|r| r.promoted),
        checked_in: count(&|r| r.checked_in),
        check_in_conflicts: rows.iter().filter(|r| r.check_in_conflicts > 0).count() as u64,
        check_ins_by_door: Default::default(),
        mails_sent: count(&|r| r.mailed),
        waiting: ledger.cache.as_ref().map(|c| c.waiting),
        unsold: u64::from(capacity).saturating_sub(on_the_way as u64),
        returned_unclaimed: ledger.cache.as_ref().map(|c| c.returned.len() as u64),
        red_packet: None,
        passed: checks.iter().all(|c| c.passed),
        checks,
    }
}

/// The numbers of the orders the cache's outbox holds that DynamoDB does not yet: on their way.
fn in_flight(rows: &[AuditRow], ledger: &Ledger) -> Vec<TicketNo> {
    let stored: HashSet<&OrderId> = rows.iter().map(|r| &r.order_id).collect();
    ledger.cache.iter().flat_map(|c| &c.outbox).filter(|(order, _)| !stored.contains(order)).map(|(_, n)| *n).collect()
}

/// Every number is in exactly one place: on sale, held for the waitlist, held by a confirmed
/// order, on its way in an order not yet stored, or in a give-back not yet run. A number in none
/// was lost (a give-back that never happened, a cache write lost); in two, it can be sold twice.
fn accounted(capacity: u32, confirmed: &[&AuditRow], in_flight: &[TicketNo], ledger: &Ledger) -> Check {
    let name = "numbers_accounted";
    let Some(cache) = &ledger.cache else {
        return Check {
            name,
            passed: true,
            detail: "the cache is not there (expired, or lost): not checked".into(),
            pending: false,
        };
    };
    let (lost, doubled) = places_of(capacity, cache, confirmed, in_flight, ledger);
    let show = |v: &[TicketNo]| format!("{:?}{}", &v[..v.len().min(20)], if v.len() > 20 { " ..." } else { "" });
    Check {
        name,
        passed: lost.is_empty() && doubled.is_empty(),
        detail: format!(
            "{} on sale, {} held for the waitlist, {} confirmed, {} on their way, {} being given back; \
             {} numbers in no place {}, {} in two {}",
            cache.on_sale.len(),
            cache.returned.len(),
            confirmed.len(),
            in_flight.len(),
            ledger.give_backs_pending.len(),
            lost.len(),
            show(&lost),
            doubled.len(),
            show(&doubled),
        ),
        pending: false,
    }
}

/// The numbers in no place, and those in two (each sorted): [`accounted`]'s count.
fn places_of(
    capacity: u32,
    cache: &CacheView,
    confirmed: &[&AuditRow],
    in_flight: &[TicketNo],
    ledger: &Ledger,
) -> (Vec<TicketNo>, Vec<TicketNo>) {
    let mut seen: HashMap<TicketNo, u32> = HashMap::new();
    let places = cache
        .on_sale
        .iter()
        .chain(&cache.returned)
        .chain(confirmed.iter().map(|r| &r.ticket_no))
        .chain(in_flight)
        .chain(&ledger.give_backs_pending);
    for n in places {
        *seen.entry(*n).or_default() += 1;
    }
    let lost: Vec<TicketNo> = (1..=capacity).map(TicketNo::new).filter(|n| !seen.contains_key(n)).collect();
    let mut doubled: Vec<TicketNo> = seen.iter().filter(|&(_, c)| *c > 1).map(|(n, _)| *n).collect();
    doubled.sort_unstable();
    (lost, doubled)
}

/// A `REJECTED` order is a grant the cache forgot: its user may have been told `202`, and no
/// user causes it. Every one fails the sale. The detail names those made before a rebuild that read
/// while orders may still have been on the queue (a sent record lost with its bucket, so the rebuild
/// went by the queue's approximate depth: docs/DESIGN.md section 10), the one way the design knows.
fn no_order_rejected(rows: &[AuditRow], rebuilds: &[RebuildRecord]) -> Check {
    let rejected: Vec<&OrderId> =
        rows.iter().filter(|r| r.status == OrderStatus::Rejected).map(|r| &r.order_id).collect();
    let by_the_queue = |order: &&&OrderId| {
        order.created_ms().is_some_and(|made| rebuilds.iter().any(|b| b.gave_up() && made < b.read_ms))
    };
    let gave_up = rebuilds.iter().filter(|b| b.gave_up()).count();
    Check {
        name: "no_order_rejected",
        passed: rejected.is_empty(),
        detail: format!(
            "{} rejected orders {:?}, {} of them made before a rebuild that read while orders may have \
             been on the queue ({} rebuilds, {gave_up} of them so)",
            rejected.len(),
            &rejected[..rejected.len().min(20)],
            rejected.iter().filter(by_the_queue).count(),
            rebuilds.len(),
        ),
        pending: false,
    }
}

/// Each ticket item names the confirmed order that holds its number, and each confirmed order's
/// number has its ticket item: a cancellation that left the item, or a confirmation without it,
/// shows here.
fn tickets_agree(confirmed: &[&AuditRow], tickets: &HashMap<TicketNo, OrderId>) -> Check {
    let holder: HashMap<TicketNo, &OrderId> = confirmed.iter().map(|r| (r.ticket_no, &r.order_id)).collect();
    let mut wrong: Vec<TicketNo> = tickets
        .iter()
        .filter(|&(n, order)| holder.get(n) != Some(&order))
        .map(|(n, _)| *n)
        .chain(holder.keys().filter(|n| !tickets.contains_key(n)).copied())
        .collect();
    wrong.sort_unstable();
    wrong.dedup();
    Check {
        name: "tickets_agree_with_orders",
        passed: wrong.is_empty(),
        detail: format!(
            "{} ticket items, {} confirmed orders; {} numbers disagree {:?}",
            tickets.len(),
            confirmed.len(),
            wrong.len(),
            &wrong[..wrong.len().min(20)]
        ),
        pending: false,
    }
}

/// One CSV cell: quoted when it holds a separator, a quote or a line break; a cell a spreadsheet
/// would run as a formula (`=`, `+`, `-`, `@`) gets a leading `'`.
pub fn csv_cell(value: &str) -> String {
    let value = if value.starts_with(['=', '+', '-', '@']) { format!("'{value}") } else { value.to_owned() };
    if value.contains([',', '"', '\n', '\r']) { format!("\"{}\"", value.replace('"', "\"\"")) } else { value }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ticket number, briefly.
    fn t(n: u32) -> TicketNo {
        TicketNo::new(n)
    }

    /// The order id of `user`'s order in these tests: one per user, the same each time.
    fn o(user: &str) -> OrderId {
        let tag: String = user.bytes().map(|b| format!("{b:02x}")).collect();
        OrderId::parse(&format!("0199a0b0-0000-7000-8000-{tag:0>12}")).unwrap()
    }

    fn row(n: u32, user: &str, status: OrderStatus, mailed: bool) -> AuditRow {
        AuditRow {
            ticket_no: t(n),
            order_id: o(user),
            user_id: UserId::parse(user).unwrap(),
            status,
            mailed,
            promoted: false,
            checked_in: false,
            check_in_conflicts: 0,
        }
    }

    /// A ledger that agrees with `rows`: ticket items for the confirmed, the rest of 1..=capacity
    /// on sale.
    fn ledger(rows: &[AuditRow], capacity: u32) -> Ledger {
        let tickets: HashMap<TicketNo, OrderId> = rows
            .iter()
            .filter(|r| r.status == OrderStatus::Confirmed)
            .map(|r| (r.ticket_no, r.order_id.clone()))
            .collect();
        let on_sale = (1..=capacity).map(t).filter(|n| !tickets.contains_key(n)).collect();
        Ledger {
            tickets,
            give_backs_pending: vec![],
            cache: Some(CacheView { on_sale, ..Default::default() }),
            rebuilds: vec![],
        }
    }

    #[test]
    fn a_ballots_outcome_is_checked_against_its_draw() {
        let e = EventId::parse("ev1").unwrap();
        let entrants = super::super::draw::entrants(["a", "b", "c", "d", "f"].map(String::from));
        let drawn =
            super::super::draw::Published::new(super::super::draw::Algorithm::V1, entrants, &[4; 32], None).unwrap();
        let users: Vec<UserId> = drawn.order.iter().map(|u| UserId::parse(u).unwrap()).collect();
        let drawn_with =
            Some(DrawnOrder { algorithm: &drawn.algorithm, entrants: users.len(), first: users.iter().collect() });
        let ord = |i: usize| drawn.order[i].as_str();
        let u = |i: usize| UserId::parse(ord(i)).unwrap();
        let rows = vec![row(1, ord(0), OrderStatus::Confirmed, true), row(2, ord(1), OrderStatus::Confirmed, true)];
        let places = [(u(2), 1), (u(3), 2), (u(4), 3)];
        let check = |r: Report| r.checks.into_iter().find(|c| c.name == "ballot_draw").unwrap();
        let clean =
            report(&e, 2, &rows, &ledger(&rows, 2)).with_draw(drawn_with.clone(), &rows, &places, &ledger(&rows, 2));
        assert!(clean.passed, "{:?}", clean.checks);

        // A loser holding an order, a waiting place out of draw order, a winner's order missing.
        let mut stranger = rows.clone();
        stranger[1] = row(2, ord(2), OrderStatus::Confirmed, true);
        assert!(
            !check(report(&e, 2, &stranger, &ledger(&stranger, 2)).with_draw(
                drawn_with.clone(),
                &stranger,
                &places,
                &ledger(&stranger, 2)
            ))
            .passed
        );
        let swapped = [(u(3), 1), (u(2), 2), (u(4), 3)];
        assert!(
            !check(report(&e, 2, &rows, &ledger(&rows, 2)).with_draw(
                drawn_with.clone(),
                &rows,
                &swapped,
                &ledger(&rows, 2)
            ))
            .passed
        );
        let one = &rows[..1];
        // The missing winner's order in the outbox, not stored yet.
        let mut on_its_way = ledger(one, 2);
        if let Some(cache) = on_its_way.cache.as_mut() {
            cache.outbox.push((o(ord(1)), t(2)));
        }
        assert!(
            !check(report(&e, 2, one, &ledger(one, 2)).with_draw(drawn_with.clone(), one, &places, &ledger(one, 2)))
                .passed
        );
        assert!(
            check(report(&e, 2, one, &ledger(one, 2)).with_draw(drawn_with.clone(), one, &places, &on_its_way)).passed,
            "on its way"
        );
        // A winner who cancelled, their number promoted to the first who waited.
        let mut promoted = rows.clone();
        promoted[0].status = OrderStatus::Cancelled;
        promoted.push(AuditRow { promoted: true, ..row(1, ord(2), OrderStatus::Confirmed, true) });
        assert!(
            check(report(&e, 2, &promoted, &ledger(&promoted, 2)).with_draw(
                drawn_with.clone(),
                &promoted,
                &places,
                &ledger(&promoted, 2)
            ))
            .passed
        );
        assert!(
            check(report(&e, 2, &rows, &ledger(&rows, 2)).with_draw(None, &rows, &[], &ledger(&rows, 2))).passed,
            "not drawn yet"
        );
    }

    #[test]
    fn a_clean_sale_passes_every_check_and_counts_each_state() {
        let e = EventId::parse("ev1").unwrap();
        let mut rows = vec![
            row(1, "a", OrderStatus::Confirmed, true),
            row(2, "b", OrderStatus::Cancelled, true),
            row(2, "c", OrderStatus::Confirmed, true),
        ];
        rows[2].promoted = true;
        rows[0].checked_in = true;
        let r = report(&e, 3, &rows, &ledger(&rows, 3));
        assert!(r.passed, "{:?}", r.checks);
        assert_eq!((r.confirmed, r.cancelled, r.rejected, r.promoted, r.checked_in, r.mails_sent), (2, 1, 0, 1, 1, 3));
        assert_eq!(r.unsold, 1);
    }

    #[test]
    fn each_broken_invariant_fails_its_own_check() {
        let e = EventId::parse("ev1").unwrap();
        let failed = |rows: &[AuditRow], ledger: &Ledger, capacity| {
            report(&e, capacity, rows, ledger)
                .checks
                .into_iter()
                .filter(|c| !c.passed)
                .map(|c| c.name)
                .collect::<Vec<_>>()
        };
        let a = row(1, "a", OrderStatus::Confirmed, true);
        let clean = vec![a.clone(), row(2, "b", OrderStatus::Confirmed, true)];
        assert!(failed(&clean, &ledger(&clean, 5), 5).is_empty());

        let twice = vec![a.clone(), row(1, "b", OrderStatus::Confirmed, true)];
        let mut l = ledger(&clean, 5);
        l.tickets.insert(t(1), o("b"));
        assert!(failed(&twice, &l, 5).contains(&"no_ticket_number_twice"));

        assert!(failed(&clean, &ledger(&clean, 5), 1).contains(&"held_within_capacity"));

        // A give-back that never ran and left no marker: the number is nowhere.
        let mut lost = ledger(&clean, 5);
        lost.cache.as_mut().unwrap().on_sale.retain(|n| *n != t(4));
        assert_eq!(failed(&clean, &lost, 5), ["numbers_accounted"]);
        // A number both on sale and held: it can be sold twice.
        let mut doubled = ledger(&clean, 5);
        doubled.cache.as_mut().unwrap().on_sale.push(t(2));
        assert_eq!(failed(&clean, &doubled, 5), ["numbers_accounted"]);
        // Numbers on their way count once: an order still in the outbox, a pending give-back.
        let mut moving = ledger(&clean, 5);
        moving.cache.as_mut().unwrap().on_sale.retain(|n| *n != t(4) && *n != t(5));
        moving.cache.as_mut().unwrap().outbox = vec![(o("x"), t(4)), (o("a"), t(1))];
        moving.give_backs_pending = vec![t(5)];
        assert!(failed(&clean, &moving, 5).is_empty());

        // A rejected order, whatever rebuild came before it: its user may have been told 202. The
        // detail names one a rebuild that went by the queue's depth read before it was stored.
        let rejected = vec![a.clone(), row(2, "b", OrderStatus::Rejected, false)];
        let made = o("b").created_ms().unwrap();
        for rebuild in [
            RebuildRecord { read_ms: made - 1, in_flight: Some(4), promoted_free: 0 },
            RebuildRecord { read_ms: made + 1, in_flight: Some(0), promoted_free: 0 },
            RebuildRecord { read_ms: made + 1, in_flight: Some(4), promoted_free: 0 },
        ] {
            let mut l = ledger(&rejected, 5);
            l.rebuilds = vec![rebuild];
            assert_eq!(failed(&rejected, &l, 5), ["no_order_rejected"], "{rebuild:?}");
            let detail = report(&e, 5, &rejected, &l).checks.into_iter().find(|c| !c.passed).unwrap().detail;
            let named = usize::from(rebuild.gave_up() && made < rebuild.read_ms);
            assert!(detail.contains(&format!("{named} of them made before")), "{detail}");
        }

        let mut promoted = clean.clone();
        promoted[1].promoted = true;
        assert_eq!(failed(&promoted, &ledger(&promoted, 5), 5), ["promotions_within_cancellations"]);
        // Unless a rebuild found a lost number free beside the waiting and handed it to them.
        let mut found = ledger(&promoted, 5);
        found.rebuilds = vec![RebuildRecord { read_ms: 0, in_flight: Some(0), promoted_free: 1 }];
        assert!(failed(&promoted, &found, 5).is_empty());

        // A cancellation that left its ticket item behind; a confirmed order without one.
        let mut stale = ledger(&clean, 5);
        stale.tickets.insert(t(3), o("gone"));
        stale.cache.as_mut().unwrap().on_sale.retain(|n| *n != t(3));
        stale.give_backs_pending = vec![t(3)];
        assert_eq!(failed(&clean, &stale, 5), ["tickets_agree_with_orders"]);
        let mut missing = ledger(&clean, 5);
        missing.tickets.remove(&t(2));
        assert_eq!(failed(&clean, &missing, 5), ["tickets_agree_with_orders"]);

        let unmailed = vec![a, row(2, "b", OrderStatus::Confirmed, false)];
        assert_eq!(failed(&unmailed, &ledger(&unmailed, 5), 5), ["every_confirmed_order_mailed"]);
    }

    #[test]
    fn csv_cells_are_quoted_and_never_formulas() {
        assert_eq!(csv_cell("plain"), "plain");
        assert_eq!(csv_cell("a,b"), "\"a,b\"");
        assert_eq!(csv_cell("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_cell("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(csv_cell("@cmd"), "'@cmd");
    }
}
