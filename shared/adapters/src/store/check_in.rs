//! Check-in at the door, in DynamoDB: the ticket item names the order, and one conditional write
//! on the order lets its holder in exactly once. A door that let a pass in offline syncs it later
//! with the time it did; when another door had checked the pass in first, the conflict is recorded
//! on the order. The door's figures (checked in of tickets) and its lookup by ticket number or
//! order id are read here too.

use aws_sdk_dynamodb::{
    operation::update_item::UpdateItemError,
    types::{AttributeValue, ReturnValuesOnConditionCheckFailure},
};
use time::{OffsetDateTime, format_description::well_known::Rfc3339};

use super::{
    Store, StoreError,
    codec::{get_n, get_s, opt_s, s},
    orders::order_from_item,
    schema::{CHECK_IN_CONFLICTS, GSI2, GSI2_SHARDS, attr, key},
};
use domain::{DoorName, Email, EventId, OrderId, OrderStatus, ScanId, TicketNo, UserId, event::rfc3339};

/// When the door let the pass in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admitted {
    /// Now, online: the door waits for this answer.
    Now(OffsetDateTime),
    /// Earlier, at this time, by a door without the network, synced now.
    Offline(OffsetDateTime),
}

/// At most this many offline times are kept on an order in conflict: a door that syncs one pass
/// again and again with new times (a fault, or a probe) cannot grow the item.
pub const CONFLICT_TIMES_KEPT: usize = 4;

/// The door may be this far behind the functions' clock: an offline time this much before the
/// order's creation is still taken.
pub const DOOR_CLOCK_SKEW: time::Duration = time::Duration::seconds(60);

/// What a scan at the door found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckIn {
    /// Let in now.
    Admitted { at: String },
    /// Scanned before, at this time, by this door (when it gave its name).
    AlreadyCheckedIn { at: String, door: Option<String> },
    /// A door let it in offline, and another door had checked it in before, at this time: the
    /// conflict is recorded on the order (the audit counts it).
    TwoDoors { at: String, door: Option<String> },
    /// The order was cancelled (or rejected): the pass is void.
    Void(OrderStatus),
    /// No such order for this user and event (a pass of another deployment, or a replaced order).
    Unknown,
    /// An offline time before the order existed (by more than the door's clock may drift).
    BeforeTheOrder { created_at: String },
}

/// What a door says of its scan: its name (the organiser counts by it), and the scan's own id (a
/// retry of the scan is the same check-in: answered as it was, no conflict).
#[derive(Debug, Clone, Copy, Default)]
pub struct Scanned<'a> {
    pub door: Option<&'a DoorName>,
    pub scan: Option<&'a ScanId>,
}

/// One ticket's holder, as the door looks it up (by number, or by order id).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Holder {
    pub ticket_no: TicketNo,
    pub order_id: OrderId,
    pub status: OrderStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checked_in_at: Option<String>,
    /// Masked ([`Email::masked`]): enough for staff to ask "is this yours?", not to copy.
    pub email: String,
}

/// The door's figures: confirmed tickets, and how many of them are checked in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DoorCounts {
    pub tickets: u64,
    pub checked_in: u64,
    /// Each confirmed order's ticket number by its id: the lookup by order id.
    pub numbers: std::collections::HashMap<OrderId, TicketNo>,
    /// When the count began.
    pub counted_at: Option<OffsetDateTime>,
    /// Check-ins by the door that made them ([`NO_DOOR_NAMED`] for a door that gave no name).
    pub by_door: std::collections::BTreeMap<String, u64>,
}

/// Where check-ins made by a door without a name are counted (no door name has parentheses).
pub const NO_DOOR_NAMED: &str = "(no door named)";

/// The door's updates of an order (only attributes the door may update:
/// `schema::updated::DOOR_ORDER`): a check-in sets the time, and the door's name and the scan's
/// id when given, once, on a confirmed order...
pub(super) const CHECK_IN_SETS: [&str; 3] =
    ["checked_in_at = :now", "checked_in_door = :door", "checked_in_scan = :scan"];
pub(super) const CHECK_IN_IF: &str =
    "order_id = :order AND #status = :confirmed AND attribute_not_exists(checked_in_at)";
pub(super) const CHECK_IN_NAMES: [(&str, &str); 1] = [("#status", "status")];
/// ...and a pass admitted at two doors offline adds the time to the order's conflicts.
pub(super) const TWO_DOORS: &str = "ADD #conflicts :at";
pub(super) const TWO_DOORS_IF: &str =
    "order_id = :order AND (attribute_not_exists(#conflicts) OR size(#conflicts) < :kept)";
pub(super) const TWO_DOORS_NAMES: [(&str, &str); 1] = [("#conflicts", CHECK_IN_CONFLICTS)];

impl Store {
    /// Checks in the ticket a pass names (event, number, order): its ticket item, read
    /// consistently, must name that order (else the order was cancelled and the number passed on,
    /// or freed), and tells whose order it is; then [`Self::check_in`].
    pub async fn check_in_ticket(
        &self,
        event: &EventId,
        ticket_no: TicketNo,
        order_id: &OrderId,
        admitted: Admitted,
        scanned: Scanned<'_>,
    ) -> Result<CheckIn, StoreError> {
        let Some((held_by, user)) = self.ticket_holder(event, ticket_no).await? else {
            return Ok(CheckIn::Void(OrderStatus::Cancelled));
        };
        if held_by != *order_id {
            return Ok(CheckIn::Void(OrderStatus::Cancelled));
        }
        let (at, offline) = match admitted {
            Admitted::Now(at) => (at, false),
            Admitted::Offline(at) => (at, true),
        };
        if offline
            && let Some(order) = self.order_record(event, &user).await?
            && let Ok(created) = OffsetDateTime::parse(&get_s(&order, "created_at")?, &Rfc3339)
            && at < created - DOOR_CLOCK_SKEW
        {
            return Ok(CheckIn::BeforeTheOrder { created_at: rfc3339(created) });
        }
        match self.check_in(event, &user, order_id, at, scanned).await? {
            // The same scan synced again (its reply was lost) finds its own time: no conflict.
            CheckIn::AlreadyCheckedIn { at: first, door } if offline && first != rfc3339(at) => {
                self.record_two_doors(event, &user, order_id, &rfc3339(at)).await?;
                Ok(CheckIn::TwoDoors { at: first, door })
            }
            other => Ok(other),
        }
    }

    /// The order and user a ticket number is held by now (read consistently), if any.
    pub async fn ticket_holder(
        &self,
        event: &EventId,
        ticket_no: TicketNo,
    ) -> Result<Option<(OrderId, UserId)>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(attr::PK, s(key::ticket(event, ticket_no)))
            .key(attr::SK, s(key::TICKET_SK))
            .consistent_read(true)
            .send()
            .await?;
        let Some(ticket) = out.item else { return Ok(None) };
        let malformed = |e: domain::ids::InvalidId| StoreError::Malformed(e.to_string());
        let order = OrderId::parse(&get_s(&ticket, "order_id")?).map_err(malformed)?;
        let user = UserId::parse(&get_s(&ticket, "user_id")?).map_err(malformed)?;
        Ok(Some((order, user)))
    }

    /// The holder of ticket `ticket_no`: its order, read consistently.
    pub async fn holder(&self, event: &EventId, ticket_no: TicketNo) -> Result<Option<Holder>, StoreError> {
        let Some((order_id, user)) = self.ticket_holder(event, ticket_no).await? else { return Ok(None) };
        let Some(item) = self.order_record(event, &user).await? else { return Ok(None) };
        let view = order_from_item(&item)?;
        if view.order_id != order_id {
            return Ok(None);
        }
        let email = Email::parse(&get_s(&item, "email")?).map_err(|e| StoreError::Malformed(e.to_string()))?;
        Ok(Some(Holder {
            ticket_no,
            order_id,
            status: view.status,
            checked_in_at: view.checked_in_at,
            email: email.masked(),
        }))
    }

    /// A ticket off the attendee list (cancelled, or rejected by a rebuild), by its number or its
    /// order id: what the door tells staff of a pass that will not go in. Reads the event's
    /// cancelled and rejected partitions (a few orders, usually none).
    pub async fn off_list_holder(
        &self,
        event: &EventId,
        ticket_no: Option<TicketNo>,
        order_id: Option<&OrderId>,
    ) -> Result<Option<Holder>, StoreError> {
        for partition in [key::cancelled(event), key::rejected(event)] {
            let query = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(GSI2)
                .expression_attribute_names("#pk", attr::GSI2PK)
                .expression_attribute_values(":p", s(&partition));
            let query = match (ticket_no, order_id) {
                (Some(n), _) => query
                    .key_condition_expression("#pk = :p AND #n = :n")
                    .expression_attribute_names("#n", attr::GSI2SK)
                    .expression_attribute_values(":n", AttributeValue::N(n.get().to_string())),
                (None, Some(o)) => query
                    .key_condition_expression("#pk = :p")
                    .filter_expression("order_id = :o")
                    .expression_attribute_values(":o", s(o.as_str())),
                (None, None) => return Ok(None),
            };
            // The latest order found on the first page that finds one (a number can be cancelled
            // more than once over a sale).
            let mut found = None;
            self.query_pages(query, |page| {
                found = page.items().iter().max_by_key(|i| get_s(i, "created_at").unwrap_or_default()).cloned();
                Ok(found.is_none())
            })
            .await?;
            if let Some(item) = found {
                let view = order_from_item(&item)?;
                let email = Email::parse(&get_s(&item, "email")?).map_err(|e| StoreError::Malformed(e.to_string()))?;
                return Ok(Some(Holder {
                    ticket_no: view.ticket_no,
                    order_id: view.order_id,
                    status: view.status,
                    checked_in_at: view.checked_in_at,
                    email: email.masked(),
                }));
            }
        }
        Ok(None)
    }

    /// The door's figures from the attendee list (every confirmed order, in its GSI2 shards):
    /// one read of each order's status, check-in and number.
    pub async fn door_counts(&self, event: &EventId) -> Result<DoorCounts, StoreError> {
        let began = OffsetDateTime::now_utc();
        let reads = (0..GSI2_SHARDS).map(|shard| {
            self.query_all(
                self.client
                    .query()
                    .table_name(&self.table)
                    .index_name(GSI2)
                    .key_condition_expression("#pk = :p")
                    .projection_expression("order_id, ticket_no, #status, checked_in_at, checked_in_door")
                    .expression_attribute_names("#pk", attr::GSI2PK)
                    .expression_attribute_names("#status", "status")
                    .expression_attribute_values(":p", s(key::event_shard(event, shard))),
            )
        });
        let mut counts = DoorCounts { counted_at: Some(began), ..DoorCounts::default() };
        for item in futures::future::try_join_all(reads).await?.into_iter().flatten() {
            if get_s(&item, "status")? != OrderStatus::Confirmed.as_str() {
                continue;
            }
            counts.tickets += 1;
            if item.contains_key("checked_in_at") {
                counts.checked_in += 1;
                let door = super::codec::opt_s(&item, "checked_in_door").unwrap_or_else(|| NO_DOOR_NAMED.to_owned());
                *counts.by_door.entry(door).or_default() += 1;
            }
            let order = OrderId::parse(&get_s(&item, "order_id")?).map_err(|e| StoreError::Malformed(e.to_string()))?;
            let number: u32 = get_n(&item, "ticket_no")?;
            counts.numbers.insert(order, TicketNo::new(number));
        }
        Ok(counts)
    }

    /// Adds an offline admission to the order's conflicts (a set: a retried sync adds nothing),
    /// keeping at most [`CONFLICT_TIMES_KEPT`] times.
    async fn record_two_doors(
        &self,
        event: &EventId,
        user: &UserId,
        order_id: &OrderId,
        offline_at: &str,
    ) -> Result<(), StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(attr::PK, s(key::order(event, user)))
            .key(attr::SK, s(key::ORDER_SK))
            .update_expression(TWO_DOORS)
            .condition_expression(TWO_DOORS_IF)
            .expression_attribute_names(TWO_DOORS_NAMES[0].0, TWO_DOORS_NAMES[0].1)
            .expression_attribute_values(":at", AttributeValue::Ss(vec![offline_at.to_owned()]))
            .expression_attribute_values(":order", s(order_id))
            .expression_attribute_values(":kept", AttributeValue::N(CONFLICT_TIMES_KEPT.to_string()))
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            // Full already: the conflict is on record.
            Err(e) if matches!(e.as_service_error(), Some(UpdateItemError::ConditionalCheckFailedException(_))) => {
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Marks the ticket used, exactly once: a conditional write on the order, so two doors scanning
    /// the same pass let one person in. The door's name and the scan's id, when it gave them, are
    /// kept beside the time; the same scan sent again (its reply lost) is answered as it was.
    pub async fn check_in(
        &self,
        event: &EventId,
        user: &UserId,
        order_id: &OrderId,
        now: OffsetDateTime,
        scanned: Scanned<'_>,
    ) -> Result<CheckIn, StoreError> {
        let at = rfc3339(now);
        let [at_set, door_set, scan_set] = CHECK_IN_SETS;
        let mut set = vec![at_set];
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(attr::PK, s(key::order(event, user)))
            .key(attr::SK, s(key::ORDER_SK));
        if let Some(door) = scanned.door {
            set.push(door_set);
            update = update.expression_attribute_values(":door", s(door.as_str()));
        }
        if let Some(scan) = scanned.scan {
            set.push(scan_set);
            update = update.expression_attribute_values(":scan", s(scan.as_str()));
        }
        let result = update
            .update_expression(format!("SET {}", set.join(", ")))
            .condition_expression(CHECK_IN_IF)
            .expression_attribute_names(CHECK_IN_NAMES[0].0, CHECK_IN_NAMES[0].1)
            .expression_attribute_values(":order", s(order_id))
            .expression_attribute_values(":confirmed", s(OrderStatus::Confirmed.as_str()))
            .expression_attribute_values(":now", s(&at))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        let err = match result {
            Ok(_) => return Ok(CheckIn::Admitted { at }),
            Err(e) => e,
        };
        let Some(UpdateItemError::ConditionalCheckFailedException(failed)) = err.as_service_error() else {
            return Err(err.into());
        };
        let old = match failed.item() {
            Some(item) => Some(item.clone()),
            None => self.order_record(event, user).await?,
        };
        let Some(old) = old else { return Ok(CheckIn::Unknown) };
        let view = order_from_item(&old)?;
        if view.order_id != *order_id {
            return Ok(CheckIn::Unknown);
        }
        let same_scan =
            scanned.scan.is_some_and(|scan| opt_s(&old, "checked_in_scan").as_deref() == Some(scan.as_str()));
        Ok(match (view.status, view.checked_in_at) {
            (OrderStatus::Confirmed, Some(at)) if same_scan => CheckIn::Admitted { at },
            (OrderStatus::Confirmed, Some(at)) => {
                CheckIn::AlreadyCheckedIn { at, door: opt_s(&old, "checked_in_door") }
            }
            (status, _) => CheckIn::Void(status),
        })
    }
}
