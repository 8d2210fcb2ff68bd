//! The Redis keys of one event and what their fields mean: the cache's layout, written once
//! (docs/DESIGN.md section 6). Every key carries the hash tag `{<event id>}`, so one script touches
//! one cluster slot.

use crate::domain::{EventId, Holding, OrderId, UserId};

/// The version of the cache's layout: its keys and the meaning of meta's fields. It is part of the
/// opening field's name ([`opening`]), which every script reads first anyway, so a cache
/// written by another layout reads as not cached in this history, at no cost, and is rebuilt
/// from DynamoDB on first touch (at once: nothing of it was lost, see `Gate::layout_outdated`).
pub const LAYOUT_VERSION: &str = "v4";

/// What the meta hash's user fields mean, stored in meta itself (for a person reading the cache).
pub(super) const LAYOUT: &str = "v4: =<user> holds <order id>:<ticket no>, #<window end ms>:<refused count> or \
                      !<cancelled order id>; closed: the waitlist is closed";

/// The event and its users, one hash: `capacity`, `start`, `end`, `cancel_until` (epoch ms),
/// `state`, `wait_max`, `closed` (the waitlist is closed), `layout` (`LAYOUT`), the opening
/// field ([`opening`]) and `open_until` (the span where the caller's clock decides, in the
/// scripts' time format), and one field per user ([`user_field`]).
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
/// The user's field in `meta`, `=<user>` (the `=` keeps it apart from the event's own fields).
/// Its value is one of: [`holding`] (the user holds that order, or cancelled it and its number is
/// not given back yet), [`cancelled`] (`!<order id>`: no second ticket), or `#<window end
/// ms>:<count>` (refused grabs in the rate window, written by `grab.lua` only).
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
/// layout ([`LAYOUT_VERSION`]): `open_from`, the start of the span where the caller's
/// clock decides, under a name carrying both. A cache from another history or layout lacks it
/// and reads as not cached, at no cost to the scripts, which read the field anyway.
pub fn opening(history: &str) -> String {
    format!("{}{history}", opening_prefix())
}
/// [`opening`] without its history: what a script is given in cluster mode, where it asks its
/// node for the history (a scripts' argument ending in `@`).
pub fn opening_prefix() -> String {
    format!("open_from@{}@", LAYOUT_VERSION)
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
/// The grab outcomes counted in one minute of the event (`<unix second>:<code>` -> count), for
/// the organiser's live page: written by the grab environments' tallies about once a second, read
/// by `live`, gone after [`TALLY_KEPT`]. Its hash tag is not the event's (`{tally:<event>}`), so in
/// cluster mode its writes land on another slot than the sale's scripts, and it is no part of the
/// cache ([`cache`]): a rebuild neither needs nor restores it.
pub fn grab_tally(e: &EventId, unix_minute: i64) -> String {
    format!("tally:{{tally:{e}}}:{unix_minute}")
}
/// How long a minute's tally is kept.
pub const TALLY_KEPT: std::time::Duration = std::time::Duration::from_secs(15 * 60);
/// When the loss of the event's cache was first seen (epoch ms), while it is being rebuilt.
pub fn lost_since(e: &EventId) -> String {
    format!("ev:{{{e}}}:lost")
}
/// Held while the event's cache is rebuilt from DynamoDB.
pub fn rebuild_lock(e: &EventId) -> String {
    format!("ev:{{{e}}}:lock")
}

/// A user's field when they hold an order (or cancelled it and its number is not given back yet):
/// `<order id>:<ticket no>`.
pub fn holding(h: &Holding) -> String {
    format!("{}:{}", h.order, h.ticket_no)
}

/// A user's field read back as what they hold; `None` when it is not a holding (a counter `#`, a
/// cancellation `!`, or anything malformed).
pub fn parse_holding(value: &str) -> Option<Holding> {
    let (order, ticket_no) = value.split_once(':')?;
    Some(Holding { order: OrderId::parse(order).ok()?, ticket_no: ticket_no.parse().ok()? })
}

/// A user's field once they cancelled `order`: `!<order id>` (no second ticket).
pub fn cancelled(order: &OrderId) -> String {
    format!("!{order}")
}
