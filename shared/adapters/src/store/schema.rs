//! The table's keys and indexes: the names the code relies on. The local runner provisions its
//! table from these, and a test checks `template.yaml` declares the same.

pub const GSI1: &str = "GSI1";
pub const GSI2: &str = "GSI2";
/// Orders of one event are spread over this many GSI2 partitions, so no index partition takes
/// every write of a 20,000-ticket drop.
pub const GSI2_SHARDS: u32 = 16;
/// The GSI1 partition that lists events.
pub const EVENTS_PARTITION: &str = "EVENTS";

/// The items' key values, built here and nowhere else (tests included).
pub mod key {
    use super::GSI2_SHARDS;
    use domain::{EventId, TicketNo, UserId, sale_mode::EntryShards};

    pub const EVENT_SK: &str = "META";
    pub const ORDER_SK: &str = "ORDER";
    pub const TICKET_SK: &str = "TICKET";

    pub fn event(e: &EventId) -> String {
        format!("EVENT#{e}")
    }
    /// One order per (event, user): the key is the rule.
    pub fn order(e: &EventId, u: &UserId) -> String {
        format!("ORDER#{e}#{u}")
    }
    /// One holder per ticket number: the key is the rule.
    pub fn ticket(e: &EventId, n: TicketNo) -> String {
        format!("TICKET#{e}#{n}")
    }
    /// GSI1: a user's orders.
    pub fn user(u: &UserId) -> String {
        format!("USER#{u}")
    }
    /// GSI2: the attendee list's partition of ticket `n`.
    pub fn attendee_shard(e: &EventId, n: TicketNo) -> String {
        event_shard(e, n.get() % GSI2_SHARDS)
    }
    pub fn event_shard(e: &EventId, shard: u32) -> String {
        format!("EVENT#{e}#{shard}")
    }
    /// GSI2: rejected orders, off the attendee list but found by a rebuild.
    pub fn rejected(e: &EventId) -> String {
        format!("EVENT#{e}#REJECTED")
    }
    /// GSI2: cancelled orders, off the attendee list; a rebuild keeps their users from grabbing again.
    pub fn cancelled(e: &EventId) -> String {
        format!("EVENT#{e}#CANCELLED")
    }
    /// A cancelled order whose number is still to be given back in Redis (one per order; removed
    /// once given back, so reconcile finds what a crash left).
    pub fn give_back_marker(e: &EventId) -> String {
        format!("RETURN#{e}")
    }
    pub const RETURN_SK_PREFIX: &str = "ORDER#";
    /// The event's waitlist: one item per user who joined (`store::waitlist`).
    pub fn waitlist(e: &EventId) -> String {
        format!("WAIT#{e}")
    }
    /// The exact rebuilds of an event's cache: one item per rebuild (`store::rebuilds`), sorted by
    /// when it read what it laid down.
    pub fn rebuilds(e: &EventId) -> String {
        format!("REBUILD#{e}")
    }
    /// A ballot's entries, a fair open's queue: one item per user (`store::draws`), sorted by
    /// `waiter`, in the user's shard of the event's (`ENTRY#<E>#<shard>`; an event released before
    /// the entries were spread keeps them all in `ENTRY#<E>`).
    pub fn entries(e: &EventId, shards: EntryShards, shard: u32) -> String {
        if shards == EntryShards::ONE { format!("ENTRY#{e}") } else { format!("ENTRY#{e}#{shard}") }
    }
    /// The draw's roll (`store::draws`): the entrants of one shard as the draw read them once the
    /// registration closed, in one or more parts (`roll_part`); a partition per shard, as the
    /// entries are.
    pub fn roll(e: &EventId, shard: u32) -> String {
        format!("ROLL#{e}#{shard}")
    }
    pub fn roll_part(part: u32) -> String {
        format!("{part:05}")
    }
    pub fn waiter(u: &UserId) -> String {
        format!("USER#{u}")
    }
}

/// Attribute names of the keys.
pub mod attr {
    pub const PK: &str = "PK";
    pub const SK: &str = "SK";
    pub const GSI1PK: &str = "GSI1PK";
    pub const GSI1SK: &str = "GSI1SK";
    pub const GSI2PK: &str = "GSI2PK";
    pub const GSI2SK: &str = "GSI2SK";
}

/// The order's attribute that records offline admissions in conflict: a string set of the times
/// the doors let the pass in offline (a set, so a retried sync adds nothing).
pub(super) const CHECK_IN_CONFLICTS: &str = "check_in_conflicts";

/// Every key attribute with its DynamoDB type (`S` or `N`).
pub const KEY_ATTRIBUTES: [(&str, &str); 6] = [
    (attr::PK, "S"),
    (attr::SK, "S"),
    (attr::GSI1PK, "S"),
    (attr::GSI1SK, "S"),
    (attr::GSI2PK, "S"),
    (attr::GSI2SK, "N"),
];

/// The indexes as (name, partition key, sort key); both project every attribute.
pub const INDEXES: [(&str, &str, &str); 2] = [(GSI1, attr::GSI1PK, attr::GSI1SK), (GSI2, attr::GSI2PK, attr::GSI2SK)];

/// The attributes each update grab and the door make may name, by item: the table's and the
/// indexes' keys (AWS asks a `dynamodb:Attributes` list to name them all), what it sets and what
/// its condition reads. The template lets them update those attributes and no other (IAM's
/// `dynamodb:Attributes`, which counts the key's and the condition's attributes too):
/// `rights::updates_may_name_only_the_attributes_the_code_names` holds the template to these, and
/// each update's unit test holds its expressions to them.
pub mod updated {
    use super::{CHECK_IN_CONFLICTS, attr};

    /// Every key attribute of the table and its indexes, then `attributes`.
    macro_rules! with_keys {
        ($($attribute:expr),* $(,)?) => {
            &[attr::PK, attr::SK, attr::GSI1PK, attr::GSI1SK, attr::GSI2PK, attr::GSI2SK, $($attribute),*]
        };
    }

    /// grab's cancellation of an order (`store::cancellations`).
    pub const GRAB_ORDER: &[&str] = with_keys!["status", "cancelled_at", "order_id", "checked_in_at"];
    /// grab's count of a fair open's late joiners on the event's item (`store::draws`).
    pub const GRAB_EVENT: &[&str] = with_keys!["late_joins", "registration_closed_at"];
    /// The door's check-in of an order and its record of a pass admitted at two doors
    /// (`store::check_in`).
    pub const DOOR_ORDER: &[&str] =
        with_keys!["order_id", "status", "checked_in_at", "checked_in_door", "checked_in_scan", CHECK_IN_CONFLICTS];

    /// The attributes the expressions of an update name, with every key attribute (the list's
    /// own), `#names` resolved by `names`: what IAM counts in `dynamodb:Attributes`.
    #[cfg(test)]
    pub(crate) fn named(expressions: &[&str], names: &[(&str, &str)]) -> std::collections::BTreeSet<String> {
        const WORDS: &[&str] = &[
            "SET",
            "ADD",
            "REMOVE",
            "DELETE",
            "AND",
            "OR",
            "NOT",
            "IN",
            "BETWEEN",
            "attribute_exists",
            "attribute_not_exists",
            "attribute_type",
            "begins_with",
            "contains",
            "size",
            "if_not_exists",
            "list_append",
        ];
        let mut named: std::collections::BTreeSet<String> =
            super::KEY_ATTRIBUTES.iter().map(|(name, _)| (*name).to_owned()).collect();
        for expression in expressions {
            for token in expression.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '#' || c == ':')) {
                if token.is_empty() || token.starts_with(':') || WORDS.contains(&token) {
                    continue;
                }
                let name = match token.strip_prefix('#') {
                    Some(_) => names.iter().find(|(k, _)| *k == token).map(|(_, v)| *v).expect("a #name given"),
                    None => token,
                };
                named.insert(name.to_owned());
            }
        }
        named
    }

    /// The list as a set, to compare with `named`.
    #[cfg(test)]
    pub(crate) fn set(list: &[&str]) -> std::collections::BTreeSet<String> {
        list.iter().map(|a| (*a).to_owned()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::updated::{DOOR_ORDER, GRAB_EVENT, GRAB_ORDER, named, set};
    use crate::store::{cancellations, check_in, draws};

    // Each update names exactly the attributes its list holds: one more in the code is refused
    // by IAM in AWS; one more in the list is a right no update uses.
    #[test]
    fn grabs_cancellation_names_only_what_grab_may_update_of_an_order() {
        assert_eq!(
            named(&[cancellations::CANCEL, cancellations::CANCEL_IF], &cancellations::CANCEL_NAMES),
            set(GRAB_ORDER)
        );
    }

    #[test]
    fn a_late_joiner_counted_names_only_what_grab_may_update_of_an_event() {
        assert_eq!(named(&[draws::LATE_JOIN, draws::LATE_JOIN_IF], &[]), set(GRAB_EVENT));
    }

    #[test]
    fn the_doors_updates_name_only_what_the_door_may_update_of_an_order() {
        let [at, door, scan] = check_in::CHECK_IN_SETS;
        let check_in = named(&[&format!("SET {at}, {door}, {scan}"), check_in::CHECK_IN_IF], &check_in::CHECK_IN_NAMES);
        let two_doors = named(&[check_in::TWO_DOORS, check_in::TWO_DOORS_IF], &check_in::TWO_DOORS_NAMES);
        assert_eq!(&check_in | &two_doors, set(DOOR_ORDER));
    }

    #[test]
    fn named_reads_names_past_values_functions_and_words() {
        let got = named(
            &["SET #s = if_not_exists(#s, :now) ADD n :one", "attribute_exists(x) AND size(y) < :k"],
            &[("#s", "stamp")],
        );
        assert_eq!(got, set(&["PK", "SK", "GSI1PK", "GSI1SK", "GSI2PK", "GSI2SK", "stamp", "n", "x", "y"]));
    }
}
