//! The sales that draw, in DynamoDB: one entry per user (`ENTRY#<E>#<shard>` / `USER#<u>`: a
//! ballot's entry, a fair open's place, in the user's shard of the event's), the draw's roll
//! (`ROLL#<E>`: the entrants as the draw read them), and on the event's item the registration's
//! close, the draw's record and a fair open's count of late arrivals.
//!
//! An entry is written in one transaction with a check that the event's registration is still
//! open, and the draw closes the registration before it reads the entries: a registration either
//! committed before the close (and is in the draw) or is refused. The key is the rule for "one
//! entry per user": a retry or a concurrent duplicate finds the first.
//!
//! The draw reads the entries shard by shard and writes each shard's entrants to the roll as it
//! goes (a leaf and a user each, in parts under DynamoDB's 400 KB item): what a draw cut off has
//! read stays read, and the draw and every page of its publication are made from the roll, never
//! from the entries again.

use std::collections::{BTreeSet, HashMap};

use aws_sdk_dynamodb::{
    operation::{transact_write_items::TransactWriteItemsError, update_item::UpdateItemError},
    types::{ConditionCheck, Put, TransactWriteItem},
};
use futures::{StreamExt, TryStreamExt, stream};
use time::OffsetDateTime;

use super::{
    Store, StoreError, built,
    codec::{Item, get_n, get_s, get_time, n, opt_s, s},
    schema::{attr, key},
};
use domain::{
    Email, EventId, UserId,
    draw::{EntryKey, Hash},
    event::rfc3339,
    sale_mode::{Entrant, EntryShards},
};

/// Shards read, or entries counted, at once.
const SHARD_READS: usize = 16;
/// `BatchGetItem` calls for one hundred addresses at most (DynamoDB leaves keys unprocessed when
/// throttled): the ask fails then (`503`), and the next goes on.
const BATCH_TRIES: usize = 10;
/// The most a roll part holds (DynamoDB's item is 400 KB): some 4,000 entrants of 36-character ids.
const ROLL_PART_BYTES: usize = 300_000;

/// One entrant as the roll keeps it: what the draw shuffles (its leaf) and whose it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollEntry {
    pub leaf: Hash,
    pub user: UserId,
}

/// An entry as stored, as its entrant sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEntry {
    pub entered_at: String,
    /// A fair open's late arrival's rank.
    pub late: Option<u64>,
    /// The entry's key and receipt (`None` for an entry made before private entrants).
    pub key: Option<EntryKey>,
    pub receipt: Option<String>,
}

/// What a registration found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registered {
    /// Entered now.
    Entered,
    /// Entered before (a retry or a duplicate): the first entry stands, with its key, receipt and
    /// late rank.
    Already(StoredEntry),
    /// The registration is closed: the draw has begun.
    Closed,
    /// A fair open's late arrival, queued behind the shuffled ones at this rank.
    Late(u64),
}

/// The draw as the event's item records it: enough to publish it again with the entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrawRecord {
    /// The organiser's revealed secret, hex.
    pub secret: String,
    /// The named beacon round's signature, hex.
    pub beacon_signature: Option<String>,
    /// The entrants' Merkle root, hex, and how many there were.
    pub root: String,
    pub entrants: u32,
    pub drawn_at: OffsetDateTime,
    /// Every winner's order is in the outbox and every other entrant waits: the draw is complete.
    pub done: bool,
    /// How many of a ballot's chunks are laid down: a draw asked again goes on from there.
    pub chunks_laid: u32,
    /// The draw's head (`TH1.`), signed once the draw is complete and kept: served as it was
    /// signed, whatever keys are held since (docs/FAIRNESS.md section 6b).
    pub head: Option<String>,
}

/// Where a ballot stands, read consistently from the event's item.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BallotState {
    pub registration_closed: bool,
    /// The shards of the entries the draw has read into its roll.
    pub rolled: BTreeSet<u32>,
    pub draw: Option<DrawRecord>,
}

fn entry_key(
    event: &EventId,
    shards: EntryShards,
    user: &UserId,
) -> [(String, aws_sdk_dynamodb::types::AttributeValue); 2] {
    [
        (attr::PK.to_owned(), s(key::entries(event, shards, shards.of(user)))),
        (attr::SK.to_owned(), s(key::waiter(user))),
    ]
}

/// An entry as stored: its key, the user and their address, when they entered, and a fair open's
/// late rank.
fn entry_item(event: &EventId, shards: EntryShards, entrant: &Entrant, now: OffsetDateTime, late: Option<u64>) -> Item {
    let mut item: Item = entry_key(event, shards, &entrant.user).into_iter().collect();
    item.insert("event_id".into(), s(event.as_str()));
    item.insert("user_id".into(), s(entrant.user.as_str()));
    item.insert("email".into(), s(entrant.email.as_str()));
    item.insert("entered_at".into(), s(rfc3339(now)));
    if let Some(rank) = late {
        item.insert("late".into(), n(rank));
    }
    if let Some(key) = &entrant.key {
        item.insert("entry_key".into(), s(key.to_hex()));
    }
    if let Some(receipt) = &entrant.receipt {
        item.insert("receipt".into(), s(receipt));
    }
    item
}

fn stored_entry(item: &Item) -> Result<Option<StoredEntry>, StoreError> {
    let Some(entered_at) = opt_s(item, "entered_at") else { return Ok(None) };
    Ok(Some(StoredEntry {
        entered_at,
        late: super::codec::opt_n(item, "late")?,
        key: entry_key_of(item)?,
        receipt: opt_s(item, "receipt"),
    }))
}

fn entry_key_of(item: &Item) -> Result<Option<EntryKey>, StoreError> {
    opt_s(item, "entry_key")
        .map(|k| EntryKey::from_hex(&k).ok_or_else(|| StoreError::Malformed("entry_key".into())))
        .transpose()
}

fn event_key(event: &EventId) -> [(String, aws_sdk_dynamodb::types::AttributeValue); 2] {
    [(attr::PK.to_owned(), s(key::event(event))), (attr::SK.to_owned(), s(key::EVENT_SK))]
}

fn malformed(e: impl std::fmt::Display) -> StoreError {
    StoreError::Malformed(e.to_string())
}

/// A roll part: its entrants' leaves end to end, their users one a line, and how many parts the
/// shard has.
fn roll_part_item(event: &EventId, shard: u32, part: u32, parts: u32, entries: &[RollEntry]) -> Item {
    let mut item = Item::from([
        (attr::PK.to_owned(), s(key::roll(event, shard))),
        (attr::SK.to_owned(), s(key::roll_part(part))),
        ("parts".to_owned(), n(parts)),
    ]);
    if !entries.is_empty() {
        let leaves: Vec<u8> = entries.iter().flat_map(|e| e.leaf).collect();
        let users: Vec<&str> = entries.iter().map(|e| e.user.as_str()).collect();
        item.insert("leaves".into(), aws_sdk_dynamodb::types::AttributeValue::B(leaves.into()));
        item.insert("users".into(), s(users.join("\n")));
    }
    item
}

/// A roll part's number, the number of parts of its shard, and its entrants.
fn roll_part_from(item: &Item) -> Result<(u32, u32, Vec<RollEntry>), StoreError> {
    let part = get_s(item, attr::SK)?.parse().map_err(|_| malformed("roll part key"))?;
    let parts = get_n(item, "parts")?;
    let leaves = match item.get("leaves") {
        Some(aws_sdk_dynamodb::types::AttributeValue::B(b)) => b.as_ref().to_vec(),
        _ => Vec::new(),
    };
    let users = opt_s(item, "users").unwrap_or_default();
    let users: Vec<&str> = if users.is_empty() { Vec::new() } else { users.split('\n').collect() };
    if leaves.len() != users.len() * 32 {
        return Err(malformed("a roll part's leaves and users differ"));
    }
    let entries = leaves
        .chunks_exact(32)
        .zip(users)
        .map(|(leaf, user)| {
            Ok(RollEntry {
                leaf: leaf.try_into().map_err(|_| malformed("roll leaf"))?,
                user: UserId::parse(user).map_err(malformed)?,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok((part, parts, entries))
}

/// A late joiner counted on the event's item (only attributes grab may update:
/// `schema::updated::GRAB_EVENT`).
pub(super) const LATE_JOIN: &str = "ADD late_joins :one";
pub(super) const LATE_JOIN_IF: &str = "attribute_exists(registration_closed_at)";

impl Store {
    /// Enters a user in the event's ballot, once, while its registration is open.
    pub async fn register(
        &self,
        event: &EventId,
        shards: EntryShards,
        entrant: &Entrant,
        now: OffsetDateTime,
    ) -> Result<Registered, StoreError> {
        let put = built(
            Put::builder()
                .table_name(&self.table)
                .set_item(Some(entry_item(event, shards, entrant, now, None)))
                .condition_expression("attribute_not_exists(#pk)")
                .expression_attribute_names("#pk", attr::PK)
                .build(),
        )?;
        let open = built(
            ConditionCheck::builder()
                .table_name(&self.table)
                .set_key(Some(event_key(event).into_iter().collect()))
                .condition_expression("attribute_exists(#pk) AND attribute_not_exists(registration_closed_at)")
                .expression_attribute_names("#pk", attr::PK)
                .build(),
        )?;
        let result = self
            .client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().put(put).build())
            .transact_items(TransactWriteItem::builder().condition_check(open).build())
            .send()
            .await;
        let err = match result {
            Ok(_) => return Ok(Registered::Entered),
            Err(e) => e,
        };
        let Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) = err.as_service_error() else {
            return Err(err.into());
        };
        let failed =
            |i: usize| cancelled.cancellation_reasons().get(i).and_then(|r| r.code()) == Some("ConditionalCheckFailed");
        if failed(0) {
            // Entered before: the first entry stands, whatever the registration's state now.
            return self.already(event, shards, &entrant.user).await;
        }
        if failed(1) {
            return Ok(Registered::Closed);
        }
        // A concurrent transaction on the same items (the same user twice at once): retried by
        // the caller, and then found.
        Err(StoreError::Dynamo("registration cancelled by a concurrent transaction".into()))
    }

    /// The entry a duplicate found in its way.
    async fn already(&self, event: &EventId, shards: EntryShards, user: &UserId) -> Result<Registered, StoreError> {
        match self.entry(event, shards, user).await? {
            Some(entry) => Ok(Registered::Already(entry)),
            None => Err(StoreError::Dynamo("entry vanished after a duplicate".into())),
        }
    }

    /// The user's entry in the event's ballot or queue, if they entered: when, their key and
    /// receipt, and their late rank if they joined a fair open after its draw.
    pub async fn entry(
        &self,
        event: &EventId,
        shards: EntryShards,
        user: &UserId,
    ) -> Result<Option<StoredEntry>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(entry_key(event, shards, user).into_iter().collect()))
            .consistent_read(true)
            .send()
            .await?;
        let Some(item) = out.item else { return Ok(None) };
        stored_entry(&item)
    }

    /// A fair open's late arrival (after its draw): the next rank from the event's counter, then
    /// the entry with it (and the receipt `receipt_for` signs for that rank), once. A retry finds
    /// the first entry; a rank taken by a request that then found the entry there is skipped (the
    /// queue admits by position, a gap costs nothing).
    pub async fn join_late(
        &self,
        event: &EventId,
        shards: EntryShards,
        entrant: &Entrant,
        now: OffsetDateTime,
        receipt_for: impl Fn(u64) -> Option<String>,
    ) -> Result<Registered, StoreError> {
        if let Some(entry) = self.entry(event, shards, &entrant.user).await? {
            return Ok(Registered::Already(entry));
        }
        let counted = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(event_key(event).into_iter().collect()))
            .update_expression(LATE_JOIN)
            .condition_expression(LATE_JOIN_IF)
            .expression_attribute_values(":one", n(1))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::UpdatedNew)
            .send()
            .await?;
        let rank: u64 = counted
            .attributes
            .as_ref()
            .ok_or_else(|| StoreError::Malformed("late_joins not returned".into()))
            .and_then(|a| get_n(a, "late_joins"))?;
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(entry_item(
                event,
                shards,
                &Entrant { receipt: receipt_for(rank), ..entrant.clone() },
                now,
                Some(rank),
            )))
            .condition_expression("attribute_not_exists(#pk)")
            .expression_attribute_names("#pk", attr::PK)
            .send()
            .await;
        match result {
            Ok(_) => Ok(Registered::Late(rank)),
            Err(e)
                if matches!(
                    e.as_service_error(),
                    Some(aws_sdk_dynamodb::operation::put_item::PutItemError::ConditionalCheckFailedException(_))
                ) =>
            {
                self.already(event, shards, &entrant.user).await
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Closes the registration (the first close stands): from then on every registration is
    /// refused, so the entries read after it are all there will be.
    pub async fn close_registration(&self, event: &EventId, now: OffsetDateTime) -> Result<(), StoreError> {
        self.stamp_once(event, "registration_closed_at", &format!("attribute_exists({})", attr::PK), now).await
    }

    /// Stamps `name` on the event's item with `now` while `condition` holds; a second stamp keeps
    /// the first.
    async fn stamp_once(
        &self,
        event: &EventId,
        name: &str,
        condition: &str,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(event_key(event).into_iter().collect()))
            .update_expression("SET #stamp = if_not_exists(#stamp, :now)")
            .condition_expression(condition)
            .expression_attribute_names("#stamp", name)
            .expression_attribute_values(":now", s(rfc3339(now)))
            .send()
            .await?;
        Ok(())
    }

    /// The entrants of one shard the draw shuffles (a fair open's late arrivals left out), read
    /// consistently page by page, each only as its user and key (the draw needs no address, and
    /// no receipt).
    pub async fn shard_entrants(
        &self,
        event: &EventId,
        shards: EntryShards,
        shard: u32,
    ) -> Result<Vec<(UserId, Option<EntryKey>)>, StoreError> {
        let query = self
            .entries_query(event, shards, shard)
            .expression_attribute_names("#late", "late")
            .projection_expression("user_id, entry_key, #late")
            .consistent_read(true);
        let mut all = Vec::new();
        self.query_pages(query, |page| {
            for item in page.items.unwrap_or_default() {
                if !item.contains_key("late") {
                    all.push((UserId::parse(&get_s(&item, "user_id")?).map_err(malformed)?, entry_key_of(&item)?));
                }
            }
            Ok(true)
        })
        .await?;
        Ok(all)
    }

    /// The addresses of `users`' entries (the places a draw lays down: only they are mailed or
    /// wait), a hundred a `BatchGetItem`.
    pub async fn entry_emails(
        &self,
        event: &EventId,
        shards: EntryShards,
        users: &[UserId],
    ) -> Result<HashMap<UserId, Email>, StoreError> {
        use aws_sdk_dynamodb::types::KeysAndAttributes;
        let batch = |users: &[UserId]| {
            let mut keys: Vec<Item> = users.iter().map(|u| entry_key(event, shards, u).into_iter().collect()).collect();
            async move {
                let mut found = Vec::new();
                for _ in 0..BATCH_TRIES {
                    if keys.is_empty() {
                        return Ok(found);
                    }
                    let request = built(
                        KeysAndAttributes::builder()
                            .set_keys(Some(keys))
                            .projection_expression("user_id, email")
                            .consistent_read(true)
                            .build(),
                    )?;
                    let out = self.client.batch_get_item().request_items(&self.table, request).send().await?;
                    for item in out.responses.as_ref().and_then(|r| r.get(&self.table)).into_iter().flatten() {
                        found.push((
                            UserId::parse(&get_s(item, "user_id")?).map_err(malformed)?,
                            Email::parse(&get_s(item, "email")?).map_err(malformed)?,
                        ));
                    }
                    keys = out
                        .unprocessed_keys
                        .and_then(|mut u| u.remove(&self.table))
                        .map(|k| k.keys)
                        .unwrap_or_default();
                    if !keys.is_empty() {
                        // Throttled: a moment before the rest.
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                }
                match keys.is_empty() {
                    true => Ok(found),
                    false => Err(StoreError::Dynamo("addresses still unprocessed after every try".into())),
                }
            }
        };
        let found: Vec<Vec<(UserId, Email)>> =
            stream::iter(users.chunks(100).map(batch)).buffer_unordered(SHARD_READS).try_collect().await?;
        Ok(found.into_iter().flatten().collect())
    }

    /// Writes one shard's entrants to the draw's roll, in parts (sorted by leaf, so a shard
    /// written twice is written the same); a shard without entrants as one empty part, so that a
    /// shard read is never told from one missing.
    pub async fn write_roll(&self, event: &EventId, shard: u32, mut entries: Vec<RollEntry>) -> Result<(), StoreError> {
        entries.sort_unstable_by_key(|e| e.leaf);
        let mut parts: Vec<&[RollEntry]> = Vec::new();
        let (mut from, mut bytes) = (0, 0);
        for (i, e) in entries.iter().enumerate() {
            let size = 33 + e.user.as_str().len();
            if bytes + size > ROLL_PART_BYTES && i > from {
                parts.push(&entries[from..i]);
                (from, bytes) = (i, 0);
            }
            bytes += size;
        }
        parts.push(&entries[from..]);
        let count = parts.len() as u32;
        let puts = parts.iter().enumerate().map(|(i, part)| {
            self.client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(roll_part_item(event, shard, i as u32, count, part)))
                .send()
        });
        futures::future::try_join_all(puts).await?;
        Ok(())
    }

    /// Counts `shards` as read into the roll, on the event's item (`roll_shards`, a set: a
    /// shard counted twice is counted once), once their parts are written.
    pub async fn shards_rolled(&self, event: &EventId, shards: &[u32]) -> Result<(), StoreError> {
        if shards.is_empty() {
            return Ok(());
        }
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(event_key(event).into_iter().collect()))
            .update_expression("ADD roll_shards :shards")
            .condition_expression("attribute_exists(registration_closed_at)")
            .expression_attribute_values(
                ":shards",
                aws_sdk_dynamodb::types::AttributeValue::Ns(shards.iter().map(u32::to_string).collect()),
            )
            .send()
            .await?;
        Ok(())
    }

    /// The whole roll, once every shard is read into it (a draw records itself only then): its
    /// entrants, in no particular order, the shards read sixteen at once. Every shard has a part
    /// at least (an empty one without entrants), and its parts must all be there and agree on
    /// their count.
    pub async fn roll(&self, event: &EventId, shards: EntryShards) -> Result<Vec<RollEntry>, StoreError> {
        let shard = |shard: u32| async move {
            let query = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("#pk = :pk")
                .expression_attribute_names("#pk", attr::PK)
                .expression_attribute_values(":pk", s(key::roll(event, shard)))
                .consistent_read(true);
            let (mut entries, mut parts, mut count) = (Vec::new(), BTreeSet::new(), None);
            self.query_pages(query, |page| {
                for item in page.items.unwrap_or_default() {
                    let (part, of, mut found) = roll_part_from(&item)?;
                    if *count.get_or_insert(of) != of {
                        return Err(malformed("a shard's roll parts disagree on their count"));
                    }
                    parts.insert(part);
                    entries.append(&mut found);
                }
                Ok(true)
            })
            .await?;
            if parts.is_empty()
                || parts.len() as u32 != count.unwrap_or(0)
                || parts.last().is_some_and(|&last| last + 1 != parts.len() as u32)
            {
                return Err(malformed("a shard of the draw's roll is missing a part"));
            }
            Ok::<_, StoreError>(entries)
        };
        let shards: Vec<Vec<RollEntry>> =
            stream::iter(shards.all().map(shard)).buffer_unordered(SHARD_READS).try_collect().await?;
        Ok(shards.into_iter().flatten().collect())
    }

    /// Loads entries already accepted elsewhere, 25 per `BatchWriteItem`, unconditioned (no check
    /// that the registration is open, none against a duplicate): for a benchmark's million-entrant
    /// ballot (`loadgen ballot-scale`), never beside a sale's own registration.
    pub async fn load_entries(
        &self,
        event: &EventId,
        shards: EntryShards,
        entrants: &[Entrant],
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
        let batches = entrants
            .chunks(25)
            .map(|chunk| {
                chunk
                    .iter()
                    .map(|e| {
                        let put = PutRequest::builder().set_item(Some(entry_item(event, shards, e, now, None))).build();
                        put.map(|p| WriteRequest::builder().put_request(p).build())
                            .map_err(|e| StoreError::Dynamo(e.to_string()))
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        for group in batches.chunks(16) {
            futures::future::try_join_all(group.iter().map(|batch| self.write_batch(batch.clone()))).await?;
        }
        Ok(())
    }

    /// A query of one shard of the event's entries.
    pub fn entries_query(
        &self,
        event: &EventId,
        shards: EntryShards,
        shard: u32,
    ) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
        self.client
            .query()
            .table_name(&self.table)
            .key_condition_expression("#pk = :pk")
            .expression_attribute_names("#pk", attr::PK)
            .expression_attribute_values(":pk", s(key::entries(event, shards, shard)))
    }

    /// How many entered (a ballot's entries, a fair open's queue before its draw): counted, not
    /// returned (`Select: COUNT`, every shard; DynamoDB still reads, and bills, every item).
    pub async fn entry_count(&self, event: &EventId, shards: EntryShards) -> Result<u64, StoreError> {
        let count = |shard| async move {
            let query = self.entries_query(event, shards, shard).select(aws_sdk_dynamodb::types::Select::Count);
            let mut total = 0u64;
            self.query_pages(query, |page| {
                total += page.count as u64;
                Ok(true)
            })
            .await?;
            Ok::<_, StoreError>(total)
        };
        let counts: Vec<u64> =
            stream::iter(shards.all().map(count)).buffer_unordered(SHARD_READS).try_collect().await?;
        Ok(counts.into_iter().sum())
    }

    /// How many joined a fair open's queue after its draw (the event item's counter).
    pub async fn late_joins(&self, event: &EventId) -> Result<u64, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(event_key(event).into_iter().collect()))
            .projection_expression("late_joins")
            .send()
            .await?;
        Ok(out.item.as_ref().map(|item| super::codec::opt_n(item, "late_joins")).transpose()?.flatten().unwrap_or(0))
    }

    /// The registration's close and the draw, from the event's item read consistently.
    pub async fn ballot_state(&self, event: &EventId) -> Result<BallotState, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(event_key(event).into_iter().collect()))
            .consistent_read(true)
            .send()
            .await?;
        let Some(item) = out.item else { return Ok(BallotState::default()) };
        let draw = match opt_s(&item, "draw_secret") {
            Some(secret) => Some(DrawRecord {
                secret,
                beacon_signature: opt_s(&item, "beacon_signature"),
                root: get_s(&item, "draw_root")?,
                entrants: get_n(&item, "draw_entrants")?,
                drawn_at: get_time(&item, "drawn_at")?,
                done: item.contains_key("draw_done_at"),
                chunks_laid: super::codec::opt_n(&item, "draw_chunks_laid")?.unwrap_or(0),
                head: opt_s(&item, "draw_head"),
            }),
            None => None,
        };
        let rolled = match item.get("roll_shards") {
            Some(aws_sdk_dynamodb::types::AttributeValue::Ns(shards)) => {
                shards.iter().map(|s| s.parse().map_err(|_| malformed("roll_shards"))).collect::<Result<_, _>>()?
            }
            _ => BTreeSet::new(),
        };
        Ok(BallotState { registration_closed: item.contains_key("registration_closed_at"), rolled, draw })
    }

    /// Records the draw once: a second record (a retry, a concurrent draw) keeps the first, which
    /// is returned either way.
    pub async fn record_draw(&self, event: &EventId, record: &DrawRecord) -> Result<DrawRecord, StoreError> {
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(event_key(event).into_iter().collect()))
            .condition_expression("attribute_exists(registration_closed_at) AND attribute_not_exists(draw_secret)")
            .expression_attribute_values(":secret", s(&record.secret))
            .expression_attribute_values(":root", s(&record.root))
            .expression_attribute_values(":count", n(record.entrants))
            .expression_attribute_values(":at", s(rfc3339(record.drawn_at)));
        let mut set = "SET draw_secret = :secret, draw_root = :root, draw_entrants = :count, drawn_at = :at".to_owned();
        if let Some(signature) = &record.beacon_signature {
            update = update.expression_attribute_values(":sig", s(signature));
            set.push_str(", beacon_signature = :sig");
        }
        match update.update_expression(set).send().await {
            Ok(_) => Ok(record.clone()),
            Err(e) if matches!(e.as_service_error(), Some(UpdateItemError::ConditionalCheckFailedException(_))) => {
                self.ballot_state(event).await?.draw.ok_or_else(|| StoreError::Dynamo("draw record missing".into()))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// A ballot's first `chunks` chunks are laid down (their orders sent, their places written):
    /// the count only grows.
    pub async fn chunks_laid(&self, event: &EventId, chunks: u32) -> Result<(), StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(event_key(event).into_iter().collect()))
            .update_expression("SET draw_chunks_laid = :n")
            .condition_expression(
                "attribute_exists(draw_secret) AND (attribute_not_exists(draw_chunks_laid) OR draw_chunks_laid < :n)",
            )
            .expression_attribute_values(":n", n(chunks))
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            // A concurrent run got there first: the count stands.
            Err(e) if matches!(e.as_service_error(), Some(UpdateItemError::ConditionalCheckFailedException(_))) => {
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Keeps the complete draw's signed head once: a second (a retry, a concurrent draw) leaves
    /// the first, which every reader then serves.
    pub async fn keep_head(&self, event: &EventId, head: &str) -> Result<(), StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(event_key(event).into_iter().collect()))
            .update_expression("SET draw_head = :head")
            .condition_expression("attribute_exists(draw_done_at) AND attribute_not_exists(draw_head)")
            .expression_attribute_values(":head", s(head))
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.as_service_error(), Some(UpdateItemError::ConditionalCheckFailedException(_))) => {
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The draw is complete: a ballot's orders are on their way and its waitlist laid down.
    pub async fn draw_done(&self, event: &EventId, now: OffsetDateTime) -> Result<(), StoreError> {
        self.stamp_once(event, "draw_done_at", "attribute_exists(draw_secret)", now).await
    }
}
