//! The organiser's audit: counts, and the invariants of DESIGN.md section 13 computed from the
//! stored orders, each with pass or fail. Pure: the caller reads the orders.

use std::collections::HashSet;

use serde::Serialize;

use super::{EventId, OrderStatus};

/// One stored order, as the audit needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRow {
    pub ticket_no: u32,
    pub order_id: String,
    pub user_id: String,
    pub status: OrderStatus,
    /// The confirmation mail went out (`mail_status` `SENT`).
    pub mailed: bool,
    pub promoted: bool,
    pub checked_in: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub passed: bool,
    pub detail: String,
}

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
    /// Confirmation mails sent (cancelled orders whose mail went out before they were cancelled
    /// count too: the mail was sent).
    pub mails_sent: u64,
    /// Users on the waitlist now, when the cache could say.
    pub waiting: Option<u64>,
    pub checks: Vec<Check>,
    /// Every check passed.
    pub passed: bool,
}

pub fn report(event: &EventId, capacity: u32, rows: &[AuditRow], waiting: Option<u64>) -> Report {
    let count = |f: &dyn Fn(&AuditRow) -> bool| rows.iter().filter(|r| f(r)).count() as u64;
    let confirmed: Vec<&AuditRow> = rows.iter().filter(|r| r.status == OrderStatus::Confirmed).collect();

    let mut numbers = HashSet::new();
    let twice: Vec<u32> = confirmed.iter().filter(|r| !numbers.insert(r.ticket_no)).map(|r| r.ticket_no).collect();
    let mut users = HashSet::new();
    let users_twice = rows.iter().filter(|r| !users.insert(r.user_id.as_str())).count();
    let mut orders = HashSet::new();
    let orders_twice = rows.iter().filter(|r| !orders.insert(r.order_id.as_str())).count();
    let out_of_range = confirmed.iter().filter(|r| r.ticket_no == 0 || r.ticket_no > capacity).count();
    let unmailed = confirmed.iter().filter(|r| !r.mailed).count();

    let checks = vec![
        Check {
            name: "no_ticket_number_twice",
            passed: twice.is_empty(),
            detail: if twice.is_empty() {
                format!("{} confirmed orders hold {} distinct numbers", confirmed.len(), numbers.len())
            } else {
                format!("numbers held twice: {twice:?}")
            },
        },
        Check {
            name: "no_user_twice",
            passed: users_twice == 0 && orders_twice == 0,
            detail: format!(
                "{} orders, {} users held two, {} order ids repeated",
                rows.len(),
                users_twice,
                orders_twice
            ),
        },
        Check {
            name: "held_within_capacity",
            passed: confirmed.len() as u64 <= u64::from(capacity) && out_of_range == 0,
            detail: format!("{} held of {capacity}; {out_of_range} numbers outside 1..{capacity}", confirmed.len()),
        },
        Check {
            name: "every_confirmed_order_mailed",
            passed: unmailed == 0,
            detail: format!(
                "{unmailed} confirmed orders without a sent mail (a few are normal while the queue drains)"
            ),
        },
    ];
    Report {
        event_id: event.clone(),
        capacity,
        confirmed: confirmed.len() as u64,
        rejected: count(&|r| r.status == OrderStatus::Rejected),
        cancelled: count(&|r| r.status == OrderStatus::Cancelled),
        promoted: count(&|r| r.promoted),
        checked_in: count(&|r| r.checked_in),
        mails_sent: count(&|r| r.mailed),
        waiting,
        passed: checks.iter().all(|c| c.passed),
        checks,
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

    fn row(n: u32, user: &str, status: OrderStatus, mailed: bool) -> AuditRow {
        AuditRow {
            ticket_no: n,
            order_id: format!("o-{user}"),
            user_id: user.into(),
            status,
            mailed,
            promoted: false,
            checked_in: false,
        }
    }

    #[test]
    fn a_clean_sale_passes_every_check_and_counts_each_state() {
        let e = EventId::parse("ev1").unwrap();
        let mut rows = vec![
            row(1, "a", OrderStatus::Confirmed, true),
            row(2, "b", OrderStatus::Cancelled, true),
            row(2, "c", OrderStatus::Confirmed, true),
            row(3, "d", OrderStatus::Rejected, false),
        ];
        rows[2].promoted = true;
        rows[0].checked_in = true;
        let r = report(&e, 2, &rows, Some(4));
        assert!(r.passed, "{:?}", r.checks);
        assert_eq!((r.confirmed, r.cancelled, r.rejected, r.promoted, r.checked_in, r.mails_sent), (2, 1, 1, 1, 1, 3));
    }

    #[test]
    fn each_broken_invariant_fails_its_own_check() {
        let e = EventId::parse("ev1").unwrap();
        let failed = |rows: &[AuditRow], capacity| {
            report(&e, capacity, rows, None)
                .checks
                .into_iter()
                .filter(|c| !c.passed)
                .map(|c| c.name)
                .collect::<Vec<_>>()
        };
        let a = row(1, "a", OrderStatus::Confirmed, true);
        assert_eq!(failed(&[a.clone(), row(1, "b", OrderStatus::Confirmed, true)], 5), ["no_ticket_number_twice"]);
        assert_eq!(failed(&[a.clone(), row(2, "a", OrderStatus::Confirmed, true)], 5), ["no_user_twice"]);
        assert_eq!(failed(&[a.clone(), row(2, "b", OrderStatus::Confirmed, true)], 1), ["held_within_capacity"]);
        assert_eq!(failed(&[a, row(2, "b", OrderStatus::Confirmed, false)], 5), ["every_confirmed_order_mailed"]);
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
