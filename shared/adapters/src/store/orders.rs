//! Orders in DynamoDB: the one transaction that makes an order durable, and the conditional
//! updates that let each order send one mail (docs/DESIGN.md section 8).

use aws_sdk_dynamodb::{
    error::SdkError,
    operation::{transact_write_items::TransactWriteItemsError, update_item::UpdateItemError},
    types::{AttributeValue, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem},
};
use time::OffsetDateTime;

use super::{
    Page, Store, StoreError,
    codec::{Item, get_n, get_s, n, opt_n, opt_s, s},
    schema::{CHECK_IN_CONFLICTS, GSI2, GSI2_SHARDS, attr, key},
};
use domain::{
    Buyer, Cancelled, Email, EventId, Holdings, MailStatus, OrderId, OrderMessage, OrderStatus, TicketNo, UserId,
    event::{epoch_ms, rfc3339},
    order::OrderView,
};

/// What persisting an order message found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Persisted {
    /// The order and its ticket were written now: the order is `CONFIRMED`.
    Confirmed,
    /// This very order was already stored (a redelivery); its mail may still be due.
    Redelivered { status: OrderStatus, mail: MailStatus },
    /// The user already holds another order for the event (the cache drifted): dropped.
    SecondOrder { existing: OrderId },
    /// The ticket number is held by another order (the cache drifted): stored as `REJECTED`.
    Rejected { held_by: Option<OrderId> },
}

/// What claiming an order's mail found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MailClaim {
    /// This caller now owns the send.
    Claimed,
    /// The mail went out already.
    AlreadySent,
    /// Another caller claimed it recently; try again later.
    InProgress,
    /// No mail is due for this order.
    NotDue,
}

fn order_key(m: &OrderMessage) -> [(String, AttributeValue); 2] {
    [(attr::PK.to_owned(), s(key::order(&m.event_id, &m.user_id))), (attr::SK.to_owned(), s(key::ORDER_SK))]
}

fn order_item(m: &OrderMessage, status: OrderStatus, now: OffsetDateTime) -> Item {
    let mut item: Item = order_key(m).into_iter().collect();
    item.extend([
        ("order_id".to_owned(), s(&m.order_id)),
        ("event_id".to_owned(), s(&m.event_id)),
        ("user_id".to_owned(), s(&m.user_id)),
        ("email".to_owned(), s(&m.email)),
        ("ticket_no".to_owned(), n(m.ticket_no)),
        ("status".to_owned(), s(status.as_str())),
        ("created_at".to_owned(), s(&m.created_at)),
        ("stored_at".to_owned(), s(rfc3339(now))),
        (attr::GSI1PK.to_owned(), s(key::user(&m.user_id))),
        (attr::GSI1SK.to_owned(), s(key::event(&m.event_id))),
    ]);
    if m.promoted {
        item.insert("promoted".into(), AttributeValue::Bool(true));
    }
    match status {
        // Only ticket holders are on the attendee list (GSI2).
        OrderStatus::Confirmed => {
            item.insert("mail_status".into(), s(MailStatus::Pending.as_str()));
            item.insert(attr::GSI2PK.into(), s(key::attendee_shard(&m.event_id, m.ticket_no)));
            item.insert(attr::GSI2SK.into(), n(m.ticket_no));
        }
        // Rejected orders sit in a GSI2 partition of their own: off the attendee list, but found
        // when the cache is rebuilt, so their users see their order instead of grabbing again.
        _ => {
            item.insert("mail_status".into(), s(MailStatus::None.as_str()));
            item.insert(attr::GSI2PK.into(), s(key::rejected(&m.event_id)));
            item.insert(attr::GSI2SK.into(), n(m.ticket_no));
        }
    }
    item
}

fn ticket_item(m: &OrderMessage) -> Item {
    [
        (attr::PK.to_owned(), s(key::ticket(&m.event_id, m.ticket_no))),
        (attr::SK.to_owned(), s(key::TICKET_SK)),
        ("order_id".to_owned(), s(&m.order_id)),
        ("user_id".to_owned(), s(&m.user_id)),
    ]
    .into_iter()
    .collect()
}

fn put(table: &str, item: Item) -> Result<TransactWriteItem, StoreError> {
    let put = Put::builder()
        .table_name(table)
        .set_item(Some(item))
        .condition_expression("attribute_not_exists(PK)")
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .build()
        .map_err(|e| StoreError::Dynamo(e.to_string()))?;
    Ok(TransactWriteItem::builder().put(put).build())
}

fn conditional_failed<E>(e: &SdkError<E>) -> bool
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata,
{
    e.as_service_error().and_then(|s| s.code()) == Some("ConditionalCheckFailedException")
}

impl Store {
    /// Makes an order durable: the order item and its ticket item in one transaction, each only if
    /// absent. Every outcome is read from the cancellation reasons; nothing can give a user two
    /// orders or a ticket two holders, and no shared item is written.
    pub async fn persist_order(&self, m: &OrderMessage, now: OffsetDateTime) -> Result<Persisted, StoreError> {
        let ticket = ticket_item(m);
        let result = self
            .client
            .transact_write_items()
            .transact_items(put(&self.table, order_item(m, OrderStatus::Confirmed, now))?)
            .transact_items(put(&self.table, ticket)?)
            .send()
            .await;
        let err = match result {
            Ok(_) => return Ok(Persisted::Confirmed),
            Err(e) => e,
        };
        let Some(TransactWriteItemsError::TransactionCanceledException(cancel)) = err.as_service_error() else {
            return Err(err.into());
        };
        let reasons = cancel.cancellation_reasons();
        let failed = |i: usize| reasons.get(i).and_then(|r| r.code()) == Some("ConditionalCheckFailed");
        let old = |i: usize| reasons.get(i).and_then(|r| r.item()).cloned();
        if failed(0) {
            let existing = match old(0) {
                Some(item) => item,
                None => self.order_item(m).await?.ok_or_else(|| StoreError::Malformed("order vanished".into()))?,
            };
            return self.existing_order(m, &existing);
        }
        if failed(1) {
            let held_by = match old(1) {
                Some(item) => Some(order_id_of(&item)?),
                None => None,
            };
            return self.reject(m, held_by, now).await;
        }
        // A conflict with a concurrent transaction on the same items: retry the message.
        Err(StoreError::Dynamo(format!(
            "transaction cancelled: {:?}",
            reasons.iter().map(|r| r.code()).collect::<Vec<_>>()
        )))
    }

    fn existing_order(&self, m: &OrderMessage, existing: &Item) -> Result<Persisted, StoreError> {
        let existing_order_id = order_id_of(existing)?;
        if existing_order_id != m.order_id {
            return Ok(Persisted::SecondOrder { existing: existing_order_id });
        }
        let status = OrderStatus::parse(&get_s(existing, "status")?)
            .ok_or_else(|| StoreError::Malformed("order status".into()))?;
        let mail = MailStatus::parse(&get_s(existing, "mail_status")?)
            .ok_or_else(|| StoreError::Malformed("mail status".into()))?;
        Ok(Persisted::Redelivered { status, mail })
    }

    /// Stores the order as `REJECTED` with its reason, so the user learns the outcome (the order
    /// is not stored when the user's order is there already: that one is reported).
    pub async fn reject(
        &self,
        m: &OrderMessage,
        held_by: Option<OrderId>,
        now: OffsetDateTime,
    ) -> Result<Persisted, StoreError> {
        let mut item = order_item(m, OrderStatus::Rejected, now);
        item.insert("reason".into(), s(format!("ticket {} is held by another order", m.ticket_no)));
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(PK)")
            .send()
            .await;
        match result {
            Ok(_) => Ok(Persisted::Rejected { held_by }),
            // The user's order appeared meanwhile: report what is there.
            Err(e) if conditional_failed(&e) => {
                let existing =
                    self.order_item(m).await?.ok_or_else(|| StoreError::Malformed("order vanished".into()))?;
                self.existing_order(m, &existing)
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn order_item(&self, m: &OrderMessage) -> Result<Option<Item>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(order_key(m).into_iter().collect()))
            .consistent_read(true)
            .send()
            .await?;
        Ok(out.item)
    }

    /// Takes the right to send this order's mail: `PENDING -> SENDING`, or a `SENDING` claim older
    /// than `stale_before` (its sender crashed between claim and send).
    pub async fn claim_mail(
        &self,
        m: &OrderMessage,
        now: OffsetDateTime,
        stale_before: OffsetDateTime,
    ) -> Result<MailClaim, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(order_key(m).into_iter().collect()))
            .update_expression("SET mail_status = :sending, mail_claimed_at = :now")
            .condition_expression(
                "order_id = :order AND #status = :confirmed AND \
                 (mail_status = :pending OR (mail_status = :sending AND mail_claimed_at < :stale))",
            )
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":sending", s(MailStatus::Sending.as_str()))
            .expression_attribute_values(":pending", s(MailStatus::Pending.as_str()))
            .expression_attribute_values(":confirmed", s(OrderStatus::Confirmed.as_str()))
            .expression_attribute_values(":order", s(&m.order_id))
            // Epoch milliseconds: numbers compare correctly, RFC 3339 strings of varying precision do not.
            .expression_attribute_values(":now", n(epoch_ms(now)))
            .expression_attribute_values(":stale", n(epoch_ms(stale_before)))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        let err = match result {
            Ok(_) => return Ok(MailClaim::Claimed),
            Err(e) => e,
        };
        let Some(UpdateItemError::ConditionalCheckFailedException(failed)) = err.as_service_error() else {
            return Err(err.into());
        };
        let existing = match failed.item() {
            Some(item) => Some(item.clone()),
            None => self.order_item(m).await?,
        };
        let Some(existing) = existing else { return Ok(MailClaim::NotDue) };
        if get_s(&existing, "order_id")? != m.order_id {
            return Ok(MailClaim::NotDue);
        }
        Ok(match MailStatus::parse(&get_s(&existing, "mail_status")?) {
            Some(MailStatus::Sent) => MailClaim::AlreadySent,
            Some(MailStatus::Sending) => MailClaim::InProgress,
            _ => MailClaim::NotDue,
        })
    }

    /// `SENDING -> SENT`, with SES's message id.
    pub async fn mark_mail_sent(
        &self,
        m: &OrderMessage,
        message_id: &str,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        self.move_mail(
            m,
            "SET mail_status = :to, mail_message_id = :id, mail_sent_at = :now REMOVE mail_claimed_at",
            MailStatus::Sent,
            Some((message_id, now)),
        )
        .await
    }

    /// Records on the order that a send under its claim went unanswered past the patience: the
    /// mail may go out whatever happens next (`mail_unanswered` counts such sends, `mail_unanswered_at`
    /// says when the last one began to wait). Only while the claim is still `SENDING`.
    pub async fn mark_mail_unanswered(&self, m: &OrderMessage, now: OffsetDateTime) -> Result<(), StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(order_key(m).into_iter().collect()))
            .update_expression("ADD mail_unanswered :one SET mail_unanswered_at = :now")
            .condition_expression("order_id = :order AND mail_status = :sending")
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":now", s(rfc3339(now)))
            .expression_attribute_values(":order", s(&m.order_id))
            .expression_attribute_values(":sending", s(MailStatus::Sending.as_str()))
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(e) if conditional_failed(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// `SENDING -> PENDING` after a failed send, so the next delivery tries again at once.
    pub async fn release_mail_claim(&self, m: &OrderMessage) -> Result<(), StoreError> {
        self.move_mail(m, "SET mail_status = :to REMOVE mail_claimed_at", MailStatus::Pending, None).await
    }

    async fn move_mail(
        &self,
        m: &OrderMessage,
        update: &str,
        to: MailStatus,
        sent: Option<(&str, OffsetDateTime)>,
    ) -> Result<(), StoreError> {
        let mut req = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(order_key(m).into_iter().collect()))
            .update_expression(update)
            .condition_expression("order_id = :order AND mail_status = :sending")
            .expression_attribute_values(":order", s(&m.order_id))
            .expression_attribute_values(":sending", s(MailStatus::Sending.as_str()))
            .expression_attribute_values(":to", s(to.as_str()));
        if let Some((id, now)) = sent {
            req = req.expression_attribute_values(":id", s(id)).expression_attribute_values(":now", s(rfc3339(now)));
        }
        match req.send().await {
            Ok(_) => Ok(()),
            Err(e) if conditional_failed(&e) => {
                tracing::warn!(order_id = %m.order_id, to = to.as_str(), "mail status moved by someone else meanwhile");
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }
}

impl Store {
    /// Every order item of an event: every GSI2 partition (the attendee shards, the rejected and
    /// the cancelled orders), each read to its end, in parallel.
    pub(super) async fn event_order_items(&self, event: &EventId) -> Result<Vec<Item>, StoreError> {
        let mut partitions: Vec<String> = (0..GSI2_SHARDS).map(|shard| key::event_shard(event, shard)).collect();
        partitions.push(key::rejected(event));
        partitions.push(key::cancelled(event));
        let reads = partitions.into_iter().map(|partition| {
            self.query_all(
                self.client
                    .query()
                    .table_name(&self.table)
                    .index_name(GSI2)
                    .key_condition_expression("#pk = :p")
                    .expression_attribute_names("#pk", attr::GSI2PK)
                    .expression_attribute_values(":p", s(partition)),
            )
        });
        Ok(futures::future::try_join_all(reads).await?.into_iter().flatten().collect())
    }

    /// The durable order of one user for one event.
    pub async fn get_order(&self, event: &EventId, user: &UserId) -> Result<Option<OrderView>, StoreError> {
        self.order_item_of(event, user, false).await?.map(|item| order_from_item(&item)).transpose()
    }

    /// The user's order item, read consistently or not.
    pub(super) async fn order_item_of(
        &self,
        event: &EventId,
        user: &UserId,
        consistent: bool,
    ) -> Result<Option<Item>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(attr::PK, s(key::order(event, user)))
            .key(attr::SK, s(key::ORDER_SK))
            .consistent_read(consistent)
            .send()
            .await?;
        Ok(out.item)
    }

    /// Loads orders already decided elsewhere as `CONFIRMED` (their order and ticket items), 25 per
    /// `BatchWriteItem`, unconditioned: for an event no sale runs on (a test of the report at
    /// 100,000 tickets, a migration), never beside the gate.
    pub async fn load_confirmed(&self, orders: &[OrderMessage], now: OffsetDateTime) -> Result<(), StoreError> {
        use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
        let items: Vec<Item> =
            orders.iter().flat_map(|m| [order_item(m, OrderStatus::Confirmed, now), ticket_item(m)]).collect();
        let batches: Vec<Vec<WriteRequest>> = items
            .chunks(25)
            .map(|chunk| {
                chunk
                    .iter()
                    .map(|item| {
                        let put = PutRequest::builder().set_item(Some(item.clone())).build();
                        put.map(|p| WriteRequest::builder().put_request(p).build())
                            .map_err(|e| StoreError::Dynamo(e.to_string()))
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<_, _>>()?;
        for group in batches.chunks(16) {
            futures::future::try_join_all(group.iter().map(|batch| self.write_batch(batch.clone()))).await?;
        }
        Ok(())
    }

    pub(super) async fn write_batch(
        &self,
        mut batch: Vec<aws_sdk_dynamodb::types::WriteRequest>,
    ) -> Result<(), StoreError> {
        while !batch.is_empty() {
            let out = self.client.batch_write_item().request_items(&self.table, batch).send().await?;
            batch = out.unprocessed_items.and_then(|mut u| u.remove(&self.table)).unwrap_or_default();
        }
        Ok(())
    }

    /// The attendee list: durable orders by ticket number, `limit` at a time after `after_ticket`.
    /// Orders are spread over [`GSI2_SHARDS`] partitions; each page reads every shard from the
    /// cursor on and merges, so the cursor is just the last ticket number shown. A shard's read may
    /// stop early (DynamoDB's 1 MB per call): the page then ends at the lowest number such a shard
    /// reached, so nothing below the cursor is ever skipped.
    pub async fn list_orders(
        &self,
        event: &EventId,
        after_ticket: u32,
        limit: usize,
    ) -> Result<Page<AttendeeRow>, StoreError> {
        // Numbers are dealt to the shards in turn (n % 16), so a page takes about limit/16 from each;
        // twice that is read, and the frontier below keeps the page exact whatever a shard returns.
        let per_shard = (limit / GSI2_SHARDS as usize + 1) * 2;
        let query = |shard: u32| {
            self.client
                .query()
                .table_name(&self.table)
                .index_name(GSI2)
                .key_condition_expression("#pk = :shard AND #sk > :after")
                .expression_attribute_names("#pk", attr::GSI2PK)
                .expression_attribute_names("#sk", attr::GSI2SK)
                .expression_attribute_values(":shard", s(key::event_shard(event, shard)))
                .expression_attribute_values(":after", AttributeValue::N(after_ticket.to_string()))
                .limit(per_shard.min(limit + 1) as i32)
                .send()
        };
        // Four shards at a time: a report's 1 MB reads all at once can starve the table's other
        // readers (and swamp the emulator, which serves one call at a time).
        let shards: Vec<u32> = (0..GSI2_SHARDS).collect();
        let mut outs = Vec::with_capacity(shards.len());
        for group in shards.chunks(4) {
            outs.extend(futures::future::join_all(group.iter().map(|&shard| query(shard))).await);
        }
        let mut rows = Vec::new();
        // The lowest last number among the shards whose read stopped before their end.
        let mut frontier: Option<TicketNo> = None;
        for out in outs {
            let out = out?;
            let mut last = None;
            for item in out.items() {
                let row = AttendeeRow::from_item(item)?;
                last = Some(row.ticket_no);
                rows.push(row);
            }
            if out.last_evaluated_key.is_some()
                && let Some(last) = last
            {
                frontier = Some(frontier.map_or(last, |f| f.min(last)));
            }
        }
        rows.sort_by_key(|r| r.ticket_no);
        let mut more = false;
        if let Some(frontier) = frontier {
            more = rows.iter().any(|r| r.ticket_no > frontier);
            rows.retain(|r| r.ticket_no <= frontier);
        }
        more |= rows.len() > limit;
        rows.truncate(limit);
        let next = if more { rows.last().map(|r| r.ticket_no.to_string()) } else { None };
        Ok(Page { items: rows, next })
    }

    /// Every stored order of an event, for rebuilding a lost cache: buyers (confirmed and rejected),
    /// the ticket numbers confirmed orders hold, and who cancelled, when (`recovery` adds the
    /// returns still due, the outbox and the waitlist).
    pub async fn holdings(&self, event: &EventId) -> Result<Holdings, StoreError> {
        let items = self.event_order_items(event).await?;
        let mut holdings = Holdings::default();
        for item in items {
            let order = order_from_item(&item)?;
            let user = UserId::parse(&get_s(&item, "user_id")?).map_err(|e| StoreError::Malformed(e.to_string()))?;
            match order.status {
                OrderStatus::Cancelled => {
                    let at = get_s(&item, "cancelled_at")?;
                    let at = OffsetDateTime::parse(&at, &time::format_description::well_known::Rfc3339)
                        .map_err(|e| StoreError::Malformed(format!("cancelled_at {at}: {e}")))?;
                    holdings.cancelled.push(Cancelled {
                        user,
                        order: order.order_id,
                        ticket_no: order.ticket_no,
                        at_ms: epoch_ms(at),
                        give_back_pending: false,
                    });
                }
                status => {
                    if status == OrderStatus::Confirmed {
                        holdings.held.insert(order.ticket_no);
                    }
                    holdings.buyers.push(Buyer { user, order: order.order_id, ticket_no: order.ticket_no });
                }
            }
        }
        Ok(holdings)
    }
}

/// One line of the attendee list. The e-mail is included: the organiser needs it at the door.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AttendeeRow {
    pub ticket_no: TicketNo,
    pub order_id: OrderId,
    pub user_id: UserId,
    pub email: Email,
    pub status: OrderStatus,
    pub created_at: String,
    /// When the order became durable (`CONFIRMED`).
    pub confirmed_at: Option<String>,
    /// Where its confirmation mail stands (`PENDING`, `SENDING`, `SENT`), and when it was sent.
    pub mail_status: Option<String>,
    pub mailed_at: Option<String>,
    /// Sends of its mail that SES left unanswered past the patience (each may have gone out).
    pub mail_unanswered: u32,
    /// The order came from the waitlist.
    pub promoted: bool,
    pub checked_in_at: Option<String>,
    /// The door it was checked in at, when that door gave its name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checked_in_door: Option<String>,
    /// Doors that let this pass in offline after another door had already checked it in (each
    /// counted once, however often its sync was retried).
    pub check_in_conflicts: u32,
}

impl AttendeeRow {
    /// The row as the audit counts it.
    pub fn audit_row(self) -> domain::audit::AuditRow {
        domain::audit::AuditRow {
            ticket_no: self.ticket_no,
            mailed: self.mail_status.as_deref() == Some("SENT"),
            promoted: self.promoted,
            checked_in: self.checked_in_at.is_some(),
            check_in_conflicts: self.check_in_conflicts,
            order_id: self.order_id,
            user_id: self.user_id,
            status: self.status,
        }
    }
}

impl AttendeeRow {
    pub(super) fn from_item(item: &Item) -> Result<Self, StoreError> {
        let view = order_from_item(item)?;
        Ok(Self {
            ticket_no: view.ticket_no,
            order_id: view.order_id,
            user_id: UserId::parse(&get_s(item, "user_id")?).map_err(|e| StoreError::Malformed(e.to_string()))?,
            email: Email::parse(&get_s(item, "email")?).map_err(|e| StoreError::Malformed(e.to_string()))?,
            status: view.status,
            created_at: get_s(item, "created_at")?,
            confirmed_at: opt_s(item, "stored_at"),
            mail_status: opt_s(item, "mail_status"),
            mailed_at: opt_s(item, "mail_sent_at"),
            mail_unanswered: opt_n(item, "mail_unanswered")?.unwrap_or(0),
            promoted: matches!(item.get("promoted"), Some(AttributeValue::Bool(true))),
            checked_in_at: opt_s(item, "checked_in_at"),
            checked_in_door: opt_s(item, "checked_in_door"),
            check_in_conflicts: match item.get(CHECK_IN_CONFLICTS) {
                Some(AttributeValue::Ss(offline)) => offline.len() as u32,
                _ => 0,
            },
        })
    }
}

pub(super) fn order_from_item(item: &Item) -> Result<OrderView, StoreError> {
    let status = get_s(item, "status")?;
    Ok(OrderView {
        order_id: OrderId::parse(&get_s(item, "order_id")?).map_err(|e| StoreError::Malformed(e.to_string()))?,
        event_id: EventId::parse(&get_s(item, "event_id")?).map_err(|e| StoreError::Malformed(e.to_string()))?,
        ticket_no: get_n(item, "ticket_no")?,
        status: OrderStatus::parse(&status).ok_or_else(|| StoreError::Malformed(format!("status {status}")))?,
        reason: opt_s(item, "reason"),
        checked_in_at: opt_s(item, "checked_in_at"),
        cancelled_at: opt_s(item, "cancelled_at"),
        amount: None,
    })
}

fn order_id_of(item: &Item) -> Result<OrderId, StoreError> {
    OrderId::parse(&get_s(item, "order_id")?).map_err(|e| StoreError::Malformed(e.to_string()))
}
