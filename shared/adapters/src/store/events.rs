//! Events: the release's conditional put, the reads of one event and of the list (by sale start,
//! through GSI1), and the `remaining` snapshot reconcile refreshes.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use time::{OffsetDateTime, format_description::well_known::Rfc3339};

use super::{
    Page, Store, StoreError,
    codec::{Item, get_n, get_s, get_time, n, opt_n, opt_s, s},
    schema::{EVENTS_PARTITION, GSI1, attr, key},
};
use domain::{
    Event, EventId,
    draw::Algorithm,
    event::rfc3339,
    red_packet::{AmountSeed, Currency, RedPacket},
    sale_mode::{BeaconRound, DrawTerms, EntryShards, QueueTerms, SaleMode},
};

#[derive(Debug, thiserror::Error)]
pub enum PutEventError {
    #[error("an event with this id exists")]
    Exists,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An event as stored, with the `remaining` snapshot that serves reads while Redis is down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    pub event: Event,
    pub remaining_snapshot: u32,
    /// The waitlist was closed and every user still waiting was sent their notice (reconcile).
    pub waitlist_closed: bool,
}

#[derive(Debug, thiserror::Error)]
#[error("the cursor is not one this API issued")]
pub struct BadCursor;

/// Why a page of the event list could not be had: a cursor this API did not issue (the caller's
/// fault), or the store.
#[derive(Debug, thiserror::Error)]
pub enum ListError {
    #[error(transparent)]
    BadCursor(#[from] BadCursor),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl<E> From<aws_sdk_dynamodb::error::SdkError<E>> for ListError
where
    E: std::error::Error + aws_sdk_dynamodb::error::ProvideErrorMetadata + Send + Sync + 'static,
{
    fn from(e: aws_sdk_dynamodb::error::SdkError<E>) -> Self {
        Self::Store(e.into())
    }
}

impl Store {
    /// Stores a new event; an id already taken is `Exists` and nothing is overwritten.
    pub async fn put_event(&self, event: &Event) -> Result<(), PutEventError> {
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(event_item(event)))
            .condition_expression("attribute_not_exists(PK)")
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_conditional_check_failed_exception()) => {
                Err(PutEventError::Exists)
            }
            Err(e) => Err(StoreError::from(e).into()),
        }
    }

    pub async fn get_event(&self, id: &EventId) -> Result<Option<StoredEvent>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(attr::PK, s(key::event(id)))
            .key(attr::SK, s(key::EVENT_SK))
            .send()
            .await?;
        out.item.map(|item| event_from_item(&item)).transpose()
    }

    /// Events, the latest sale first.
    pub async fn list_events(&self, limit: i32, cursor: Option<&str>) -> Result<Page<StoredEvent>, ListError> {
        let start = cursor.map(decode_event_cursor).transpose()?;
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(GSI1)
            .key_condition_expression("#pk = :events")
            .expression_attribute_names("#pk", attr::GSI1PK)
            .expression_attribute_values(":events", s(EVENTS_PARTITION))
            .scan_index_forward(false)
            .limit(limit)
            .set_exclusive_start_key(start)
            .send()
            .await?;
        let items = out.items().iter().map(event_from_item).collect::<Result<Vec<_>, _>>()?;
        let next = out.last_evaluated_key().and_then(|k| match k.get(attr::GSI1SK) {
            Some(AttributeValue::S(sk)) => Some(URL_SAFE_NO_PAD.encode(sk)),
            _ => None,
        });
        Ok(Page { items, next })
    }

    /// Records that the event's waitlist is closed and its notices are on their way.
    pub async fn mark_waitlist_closed(&self, event: &EventId, now: time::OffsetDateTime) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .key(attr::PK, s(key::event(event)))
            .key(attr::SK, s(key::EVENT_SK))
            .update_expression("SET waitlist_closed_at = :now")
            .condition_expression("attribute_exists(PK)")
            .expression_attribute_values(":now", s(domain::event::rfc3339(now)))
            .send()
            .await?;
        Ok(())
    }

    /// Refreshes the event's `remaining` snapshot, served while Redis cannot answer.
    pub async fn set_remaining(&self, event: &EventId, remaining: u32) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .key(attr::PK, s(key::event(event)))
            .key(attr::SK, s(key::EVENT_SK))
            .update_expression("SET remaining = :r")
            .condition_expression("attribute_exists(PK)")
            .expression_attribute_values(":r", AttributeValue::N(remaining.to_string()))
            .send()
            .await?;
        Ok(())
    }

    /// Every event, page by page to the end (reconcile's walk).
    pub async fn all_events(&self) -> Result<Vec<StoredEvent>, StoreError> {
        let mut events = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = self.list_events(100, cursor.as_deref()).await.map_err(|e| match e {
                ListError::Store(e) => e,
                ListError::BadCursor(e) => StoreError::Malformed(e.to_string()),
            })?;
            events.extend(page.items);
            match page.next {
                Some(next) => cursor = Some(next),
                None => return Ok(events),
            }
        }
    }
}

pub(super) fn event_item(event: &Event) -> Item {
    let mut item = HashMap::from([
        (attr::PK.to_owned(), s(key::event(&event.id))),
        (attr::SK.to_owned(), s(key::EVENT_SK)),
        (attr::GSI1PK.to_owned(), s(EVENTS_PARTITION)),
        (attr::GSI1SK.to_owned(), s(event_list_key(event))),
        ("event_id".to_owned(), s(event.id.as_str())),
        ("title".to_owned(), s(&event.title)),
        ("capacity".to_owned(), n(event.capacity)),
        ("sale_start".to_owned(), s(rfc3339(event.sale_start))),
        ("sale_end".to_owned(), s(rfc3339(event.sale_end))),
        ("created_at".to_owned(), s(rfc3339(event.created_at))),
        ("cancel_until".to_owned(), s(rfc3339(event.cancel_until))),
        ("waitlist_size".to_owned(), n(event.waitlist_size)),
        ("remaining".to_owned(), n(event.capacity)),
    ]);
    if let Some(v) = &event.venue {
        item.insert("venue".into(), s(v));
    }
    if let Some(v) = event.starts_at {
        item.insert("starts_at".into(), s(rfc3339(v)));
    }
    if let Some(v) = &event.description {
        item.insert("description".into(), s(v));
    }
    if let Some(packet) = &event.red_packet {
        item.insert("rp_total".into(), AttributeValue::N(packet.total.to_string()));
        item.insert("rp_currency".into(), s(packet.currency.as_str()));
        item.insert("rp_seed".into(), s(packet.seed.to_hex()));
    }
    if event.buckets > 1 {
        item.insert("buckets".into(), n(event.buckets));
    }
    if let Some(rate) = event.expected_rate {
        item.insert("expected_rate".into(), n(rate));
    }
    if let Some(queue) = &event.queue {
        item.insert("queue_opens".into(), s(rfc3339(queue.opens)));
        item.insert("admission_rate".into(), n(queue.admission_rate));
    }
    if let Some(terms) = &event.draw {
        item.insert("sale_mode".into(), s(event.sale_mode.as_str()));
        item.insert("draw_commitment".into(), s(&terms.commitment));
        item.insert("draw_algorithm".into(), s(terms.algorithm.name()));
        if let Some(bits) = terms.proof_of_work_bits {
            item.insert("pow_bits".into(), n(bits));
        }
        if let Some(beacon) = &terms.beacon {
            item.insert("beacon_key".into(), s(&beacon.public_key));
            item.insert("beacon_round".into(), n(beacon.round));
        }
        if let Some(close) = terms.entries_close {
            item.insert("entries_close".into(), s(rfc3339(close)));
        }
        if terms.entry_shards != EntryShards::ONE {
            item.insert("entry_shards".into(), n(terms.entry_shards.get()));
        }
        if !terms.receipt_keys.is_empty() {
            let keys = serde_json::to_string(&terms.receipt_keys).expect("strings always serialize");
            item.insert("receipt_keys".into(), s(keys));
        }
    }
    for (name, at) in [("check_in_from", event.check_in_from), ("check_in_until", event.check_in_until)] {
        if let Some(v) = at {
            item.insert(name.into(), s(rfc3339(v)));
        }
    }
    item
}

pub(super) fn event_from_item(item: &Item) -> Result<StoredEvent, StoreError> {
    let id = get_s(item, "event_id")?;
    let sale_end = get_time(item, "sale_end")?;
    let capacity = get_n(item, "capacity")?;
    let event = Event {
        id: EventId::parse(&id).map_err(|e| StoreError::Malformed(e.to_string()))?,
        title: get_s(item, "title")?,
        capacity,
        sale_start: get_time(item, "sale_start")?,
        sale_end,
        // Events released before cancellation existed: the sale's own window, a full waitlist.
        cancel_until: get_time(item, "cancel_until").unwrap_or(sale_end),
        waitlist_size: get_n(item, "waitlist_size").unwrap_or(capacity),
        venue: opt_s(item, "venue"),
        starts_at: opt_s(item, "starts_at").and_then(|v| OffsetDateTime::parse(&v, &Rfc3339).ok()),
        description: opt_s(item, "description"),
        check_in_from: opt_s(item, "check_in_from").and_then(|v| OffsetDateTime::parse(&v, &Rfc3339).ok()),
        check_in_until: opt_s(item, "check_in_until").and_then(|v| OffsetDateTime::parse(&v, &Rfc3339).ok()),
        expected_rate: opt_n(item, "expected_rate")?,
        buckets: opt_n(item, "buckets")?.unwrap_or(1),
        red_packet: red_packet_from_item(item)?,
        sale_mode: sale_mode_from_item(item)?,
        draw: draw_from_item(item)?,
        queue: queue_from_item(item)?,
        created_at: get_time(item, "created_at")?,
    };
    let remaining_snapshot = get_n(item, "remaining").unwrap_or(event.capacity);
    let waitlist_closed = item.contains_key("waitlist_closed_at");
    Ok(StoredEvent { event, remaining_snapshot, waitlist_closed })
}

/// Events released before sale modes existed are first come.
fn sale_mode_from_item(item: &Item) -> Result<SaleMode, StoreError> {
    match opt_s(item, "sale_mode") {
        None => Ok(SaleMode::FirstCome),
        Some(mode) => SaleMode::parse(&mode).ok_or_else(|| StoreError::Malformed(format!("sale_mode {mode}"))),
    }
}

fn queue_from_item(item: &Item) -> Result<Option<QueueTerms>, StoreError> {
    if !item.contains_key("queue_opens") {
        return Ok(None);
    }
    Ok(Some(QueueTerms { opens: get_time(item, "queue_opens")?, admission_rate: get_n(item, "admission_rate")? }))
}

fn draw_from_item(item: &Item) -> Result<Option<DrawTerms>, StoreError> {
    let Some(commitment) = opt_s(item, "draw_commitment") else { return Ok(None) };
    let beacon = match opt_s(item, "beacon_key") {
        Some(public_key) => Some(BeaconRound { public_key, round: get_n(item, "beacon_round")? }),
        None => None,
    };
    let terms = DrawTerms::new(&commitment, beacon).map_err(|(_, e)| StoreError::Malformed(format!("draw: {e}")))?;
    let entries_close = match opt_s(item, "entries_close") {
        Some(_) => Some(get_time(item, "entries_close")?),
        None => None,
    };
    // An event released before private entrants names no algorithm: its draw is v1's.
    let algorithm = match opt_s(item, "draw_algorithm") {
        Some(name) => Algorithm::parse(&name).ok_or_else(|| StoreError::Malformed(format!("draw_algorithm {name}")))?,
        None => Algorithm::V1,
    };
    // An event released before its entries were spread keeps them in one partition.
    let entry_shards = match opt_n::<u32>(item, "entry_shards")? {
        Some(count) => EntryShards::new(count).ok_or_else(|| StoreError::Malformed(format!("entry_shards {count}")))?,
        None => EntryShards::ONE,
    };
    // An event released before its receipt keys were committed names none.
    let receipt_keys = match opt_s(item, "receipt_keys") {
        Some(text) => serde_json::from_str(&text).map_err(|e| StoreError::Malformed(format!("receipt_keys: {e}")))?,
        None => Vec::new(),
    };
    Ok(Some(DrawTerms {
        algorithm,
        proof_of_work_bits: opt_n(item, "pow_bits")?,
        entries_close,
        receipt_keys,
        entry_shards,
        ..terms
    }))
}

fn red_packet_from_item(item: &Item) -> Result<Option<RedPacket>, StoreError> {
    let Some(total) = opt_n(item, "rp_total")? else { return Ok(None) };
    let malformed = |e: &dyn std::fmt::Display| StoreError::Malformed(format!("red packet: {e}"));
    let currency = Currency::parse(&get_s(item, "rp_currency")?).map_err(|e| malformed(&e))?;
    let seed = AmountSeed::from_hex(&get_s(item, "rp_seed")?).map_err(|e| malformed(&e))?;
    Ok(Some(RedPacket { total, currency, seed }))
}

fn decode_event_cursor(cursor: &str) -> Result<HashMap<String, AttributeValue>, BadCursor> {
    // openapi.yaml's `EventCursor`: what the API issues is far shorter.
    if cursor.len() > 512 {
        return Err(BadCursor);
    }
    let sk = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| BadCursor)?;
    let sk = String::from_utf8(sk).map_err(|_| BadCursor)?;
    let (_, id) = sk.rsplit_once('#').ok_or(BadCursor)?;
    let id = EventId::parse(id).map_err(|_| BadCursor)?;
    Ok(HashMap::from([
        (attr::PK.to_owned(), s(key::event(&id))),
        (attr::SK.to_owned(), s(key::EVENT_SK)),
        (attr::GSI1PK.to_owned(), s(EVENTS_PARTITION)),
        (attr::GSI1SK.to_owned(), s(sk)),
    ]))
}

/// The event list's sort key: sale start, then id, so equal starts stay distinct.
pub(crate) fn event_list_key(event: &Event) -> String {
    format!("{}#{}", rfc3339(event.sale_start), event.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2_000))]
        /// Any cursor: refused, or the key of an event with a valid id; a cursor this API issued
        /// always reads back.
        #[test]
        fn any_cursor_is_refused_or_names_a_valid_event(cursor in "\\PC{0,80}|[A-Za-z0-9_-]{0,80}", id in "[A-Za-z0-9_-]{1,64}") {
            if let Ok(key) = decode_event_cursor(&cursor) {
                let pk = key[attr::PK].as_s().unwrap();
                proptest::prop_assert!(EventId::parse(pk.trim_start_matches("EVENT#")).is_ok());
            }
            let issued = URL_SAFE_NO_PAD.encode(format!("2026-12-01T09:00:00Z#{id}"));
            proptest::prop_assert!(decode_event_cursor(&issued).is_ok());
        }
    }
}

/// Where an [`EventBook`] reads an event it does not remember: the store, or a test's fake.
pub trait EventSource: Clone + Send + Sync + 'static {
    fn stored_event(
        &self,
        id: &EventId,
    ) -> impl std::future::Future<Output = Result<Option<StoredEvent>, StoreError>> + Send;
}

impl EventSource for super::Store {
    async fn stored_event(&self, id: &EventId) -> Result<Option<StoredEvent>, StoreError> {
        self.get_event(id).await
    }
}

/// Released events, remembered per execution environment once read (an event never changes once
/// released), and ids DynamoDB does not know, remembered for [`MISS_KEPT`]: requests naming an
/// unknown event cost no read meanwhile (a flood of made-up ids costs one read per id and
/// environment per that time); an event released meanwhile is seen after it. Both maps bounded.
/// One read per id at a time: the requests that find an event unknown to memory while it is being
/// read wait for that read (a cold environment's first burst costs one read, not one each).
#[derive(Clone)]
pub struct EventBook<S: EventSource = super::Store> {
    source: S,
    events: std::sync::Arc<std::sync::Mutex<HashMap<EventId, Event>>>,
    misses: std::sync::Arc<std::sync::Mutex<HashMap<EventId, std::time::Instant>>>,
    /// Reads that failed, and why: for [`FAILURE_KEPT`] the requests waiting on that read, and
    /// those after it, are answered with the failure instead of each reading in turn.
    failures: std::sync::Arc<std::sync::Mutex<HashMap<EventId, (std::time::Instant, String)>>>,
    reading: std::sync::Arc<std::sync::Mutex<HashMap<EventId, std::sync::Arc<tokio::sync::Mutex<()>>>>>,
}

/// How long an unknown id is remembered as unknown.
pub const MISS_KEPT: std::time::Duration = std::time::Duration::from_secs(2);
/// How long a failed read is remembered: a DynamoDB that does not answer is asked once a second
/// per event and environment, not once per request queued behind the last failure (which turned
/// 50 grabs waiting on one event into 50 reads in a row, each its own retries and timeouts).
pub const FAILURE_KEPT: std::time::Duration = std::time::Duration::from_secs(1);
/// Events (and misses) remembered per execution environment.
const EVENTS_KEPT: usize = 1_000;

impl<S: EventSource> EventBook<S> {
    pub fn new(source: S) -> Self {
        Self {
            source,
            events: Default::default(),
            misses: Default::default(),
            failures: Default::default(),
            reading: Default::default(),
        }
    }

    /// Whether this environment already holds `id` as a released event (no read).
    pub fn knows(&self, id: &EventId) -> bool {
        matches!(self.remembered(id), Some(Some(_)))
    }

    /// What memory says of `id`: the event, known unknown (`Some(None)`), or nothing yet (`None`).
    fn remembered(&self, id: &EventId) -> Option<Option<Event>> {
        if let Some(event) = self.events.lock().expect("events").get(id) {
            return Some(Some(event.clone()));
        }
        if self.misses.lock().expect("misses").get(id).is_some_and(|at| at.elapsed() < MISS_KEPT) {
            return Some(None);
        }
        None
    }

    /// A read of `id` that failed within [`FAILURE_KEPT`], as the error it gave.
    fn recent_failure(&self, id: &EventId) -> Option<StoreError> {
        let failures = self.failures.lock().expect("failures");
        let (at, reason) = failures.get(id)?;
        (at.elapsed() < FAILURE_KEPT).then(|| StoreError::Dynamo(format!("a read just failed: {reason}")))
    }

    pub async fn get(&self, id: &EventId) -> Result<Option<Event>, StoreError> {
        if let Some(known) = self.remembered(id) {
            return Ok(known);
        }
        if let Some(failed) = self.recent_failure(id) {
            return Err(failed);
        }
        let turn = self.reading.lock().expect("reading").entry(id.clone()).or_default().clone();
        let _reading = turn.lock().await;
        // The read before this one may have answered, or failed, meanwhile.
        if let Some(known) = self.remembered(id) {
            return Ok(known);
        }
        if let Some(failed) = self.recent_failure(id) {
            return Err(failed);
        }
        let read = self.source.stored_event(id).await;
        self.reading.lock().expect("reading").remove(id);
        let read = match read {
            Ok(read) => {
                self.failures.lock().expect("failures").remove(id);
                read
            }
            Err(e) => {
                let mut failures = self.failures.lock().expect("failures");
                if failures.len() >= EVENTS_KEPT {
                    failures.clear();
                }
                failures.insert(id.clone(), (std::time::Instant::now(), e.to_string()));
                return Err(e);
            }
        };
        let Some(stored) = read else {
            let mut misses = self.misses.lock().expect("misses");
            if misses.len() >= EVENTS_KEPT {
                misses.retain(|_, at| at.elapsed() < MISS_KEPT);
                if misses.len() >= EVENTS_KEPT {
                    misses.clear();
                }
            }
            misses.insert(id.clone(), std::time::Instant::now());
            return Ok(None);
        };
        let mut events = self.events.lock().expect("events");
        if events.len() >= EVENTS_KEPT {
            events.clear();
        }
        events.insert(id.clone(), stored.event.clone());
        Ok(Some(stored.event))
    }
}

#[cfg(test)]
mod book_tests {
    use std::sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    };

    use super::*;

    /// A source that counts its reads and answers slowly, knowing one event (or failing each read,
    /// while `down`).
    #[derive(Clone)]
    struct Slow {
        reads: Arc<AtomicUsize>,
        event: Event,
        down: Arc<std::sync::atomic::AtomicBool>,
    }

    impl EventSource for Slow {
        async fn stored_event(&self, id: &EventId) -> Result<Option<StoredEvent>, StoreError> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            if self.down.load(Ordering::SeqCst) {
                return Err(StoreError::Dynamo("unreachable".into()));
            }
            Ok((id == &self.event.id).then(|| StoredEvent {
                event: self.event.clone(),
                remaining_snapshot: 0,
                waitlist_closed: false,
            }))
        }
    }

    fn event(id: &str) -> Event {
        let draft = serde_json::json!({ "id": id, "title": "t", "capacity": 1,
            "sale_start": "2030-01-01T09:00:00Z", "sale_end": "2030-01-01T10:00:00Z" });
        domain::EventDraft::from_json(&draft).unwrap().into_event(time::OffsetDateTime::UNIX_EPOCH).unwrap()
    }

    #[tokio::test]
    async fn a_burst_for_one_unknown_event_reads_it_once() {
        let source = Slow { reads: Arc::default(), event: event("known"), down: Arc::default() };
        let book = EventBook::new(source.clone());
        let known = EventId::parse("known").unwrap();
        let found = futures::future::join_all((0..64).map(|_| book.get(&known))).await;
        assert!(found.iter().all(|f| f.as_ref().unwrap().as_ref().map(|e| &e.id) == Some(&known)));
        assert_eq!(source.reads.load(Ordering::SeqCst), 1, "one read for the burst");
        let nowhere = EventId::parse("nowhere").unwrap();
        let missed = futures::future::join_all((0..64).map(|_| book.get(&nowhere))).await;
        assert!(missed.iter().all(|f| f.as_ref().unwrap().is_none()));
        assert_eq!(source.reads.load(Ordering::SeqCst), 2, "and one for an unknown id");
    }

    #[tokio::test]
    async fn a_burst_behind_a_failing_read_shares_its_failure_and_reads_again_a_second_later() {
        let source = Slow { reads: Arc::default(), event: event("known"), down: Arc::new(true.into()) };
        let book = EventBook::new(source.clone());
        let known = EventId::parse("known").unwrap();
        let started = std::time::Instant::now();
        let failed = futures::future::join_all((0..64).map(|_| book.get(&known))).await;
        assert!(failed.iter().all(Result::is_err), "every request told the read failed");
        assert_eq!(source.reads.load(Ordering::SeqCst), 1, "one read for the burst, not one each in turn");
        assert!(started.elapsed() < std::time::Duration::from_millis(500), "{:?}", started.elapsed());
        source.down.store(false, Ordering::SeqCst);
        assert!(book.get(&known).await.is_err(), "within the second, the failure stands");
        tokio::time::sleep(FAILURE_KEPT).await;
        assert_eq!(book.get(&known).await.unwrap().map(|e| e.id), Some(known));
        assert_eq!(source.reads.load(Ordering::SeqCst), 2);
    }
}
