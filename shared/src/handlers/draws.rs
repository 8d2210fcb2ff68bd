//! The routes of the sales that draw (docs/DESIGN.md section 11). A ballot: a user registers
//! (`POST /events/{id}/entry`, in grab) and sees their entry (`GET /events/{id}/entry`, in query).
//! A fair open: a user joins the queue and sees their place, with an admission token once
//! admitted (`POST`/`GET /events/{id}/queue`, in grab). Both: anyone reads the published draw
//! (`GET /events/{id}/draw`, in query); the organiser draws (`POST /admin/events/{id}/draw`, in
//! release).
//!
//! The draw reveals the secret committed at release, closes the registration (DynamoDB), reads
//! every entry shard by shard into the draw's roll, draws from the roll and records the draw on
//! the event's item. A ballot's is then laid down in the cache chunk by chunk (`draw.lua`): each
//! winner's order goes to the outbox and on to the queue like a grab's, each waiting entrant's
//! place is written to DynamoDB and the cache in draw order. Every step is idempotent and counted
//! where it is stored, and one ask of the draw starts new work only for a few seconds (`ROLL_FOR`,
//! `LAY_FOR`), answering `202 DRAWING` with how far it got: a draw of any size is finished by
//! asking again. A fair open's draw lays nothing down: its queue admits in the draw's order.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::{StreamExt, TryStreamExt, stream};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::{
    delivery::{Courier, Delivery},
    domain::{
        Event, EventId, OrderId, UserId, Waiter,
        draw::{self, Algorithm, EntryKey, ProofStep, Published},
        entry_receipt::{DrawHead, ReceiptKey},
        event::{epoch_ms, rfc3339},
        hex,
        order::{MessageHead, WaitHead},
        proof_of_work,
        sale_mode::{self, Entrant, EntryShards, Revealed, SaleMode},
        verify_hash::HashKey,
    },
    gate::{DrawLaid, DrawWaiter, DrawWinner, Gate},
    http::{ApiError, Caller, reply::json_body},
    recovery::{Rebuild, Rebuilder},
    secrets::StagedSecret,
    store::{
        Store,
        draws::{DrawRecord, Registered, RollEntry, StoredEntry},
    },
};

/// Entrants one `draw.lua` call lays down: a few hundred keeps each script well under a
/// millisecond of the event's slot.
const DRAW_CHUNK: usize = 500;
/// Waiting places written to DynamoDB at once.
const PLACE_WRITES: usize = 16;
/// Shards of the entries read into the roll at once: one wave, then its shards counted as read.
const ROLL_WAVE: usize = 16;
/// One ask of a draw starts reading the entries for this long, and draws from the roll only if it
/// is complete by then (release's timeout is 15 s: a wave, the roll's read and the draw of a
/// million entrants each take seconds on the emulator)...
const ROLL_FOR: Duration = Duration::from_secs(6);
/// ... and lays down chunks until this long after it began. Whatever it has not begun, the next
/// ask does.
const LAY_FOR: Duration = Duration::from_secs(10);

/// How long an admission token lasts: long enough to ask verify-hash, short enough that a token
/// passed on is soon worthless (a user asks for another whenever they like).
pub const ADMISSION_TTL: std::time::Duration = std::time::Duration::from_secs(120);

/// An entry's body: none, or the work the event asks for (`domain::proof_of_work`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Work {
    #[serde(default)]
    proof_of_work: Option<String>,
}

impl Work {
    /// The request's body: empty, or `{"proof_of_work": "<nonce>"}`.
    pub fn of(req: &lambda_http::Request) -> Result<Self, ApiError> {
        if req.body().is_empty() {
            return Ok(Self::default());
        }
        json_body(req)
    }

    /// Whether the work is what `event` asks of `user` (nothing, when it asks none).
    fn check(&self, event: &Event, user: &crate::domain::UserId) -> Result<(), ApiError> {
        let Some(bits) = event.draw.as_ref().and_then(|d| d.proof_of_work_bits) else { return Ok(()) };
        match &self.proof_of_work {
            Some(nonce) if proof_of_work::verify(&event.id, user, bits, nonce) => Ok(()),
            _ => Err(ApiError::BadProofOfWork { bits }),
        }
    }
}

/// The event, known and sold in `mode`.
async fn event_in(rebuilder: &Rebuilder, id: &EventId, mode: SaleMode) -> Result<Event, ApiError> {
    let event = rebuilder.event(id).await?.ok_or(ApiError::EventNotFound)?;
    match (mode, event.sale_mode) {
        (want, got) if want == got => Ok(event),
        (SaleMode::FairOpen, _) => Err(ApiError::NotAFairOpen),
        _ => Err(ApiError::NotABallot),
    }
}

/// The event, known and a sale that draws (a ballot, a fair open).
async fn drawing_event(rebuilder: &Rebuilder, id: &EventId) -> Result<Event, ApiError> {
    let event = rebuilder.event(id).await?.ok_or(ApiError::EventNotFound)?;
    if event.draw.is_none() {
        return Err(ApiError::NotABallot);
    }
    Ok(event)
}

/// `POST /events/{id}/entry` (grab): one entry per user, until the draw closes the registration.
#[derive(Clone)]
pub struct Entries {
    store: Store,
    rebuilder: Rebuilder,
    receipts: StagedSecret<ReceiptKey>,
}

/// An entry's key, its leaf in the draw and its signed receipt (docs/FAIRNESS.md sections 2a and
/// 6a), as an entry's or a queue place's routes show them: to the entrant alone; absent for an
/// event released before private entrants.
#[derive(Debug, Serialize)]
pub struct EntryShown {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leaf: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt: Option<String>,
}

impl EntryShown {
    fn of(event: &EventId, entry: &StoredEntry) -> Self {
        Self {
            entry_key: entry.key.as_ref().map(EntryKey::to_hex),
            leaf: entry.key.as_ref().map(|k| k.leaf(event)),
            receipt: entry.receipt.clone(),
        }
    }
}

/// A user's entry, as the entry routes show it.
#[derive(Debug, Serialize)]
pub struct EntryView {
    pub event_id: EventId,
    pub status: &'static str,
    pub entered_at: String,
    #[serde(flatten)]
    pub shown: EntryShown,
    /// A fair open's place taken after its entries closed: its rank behind the shuffled places
    /// (it has no place in the draw to prove).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub late: Option<u64>,
    /// After the draw: the entrant's place in its order (1 is first), and the path from their
    /// leaf to the published root.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub draw_position: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub won: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proof: Option<Vec<ProofStep>>,
}

impl EntryView {
    /// An entry before its draw.
    fn entered(event: &EventId, entry: StoredEntry) -> Self {
        Self {
            event_id: event.clone(),
            status: "ENTERED",
            shown: EntryShown::of(event, &entry),
            late: entry.late,
            entered_at: entry.entered_at,
            draw_position: None,
            won: None,
            root: None,
            proof: None,
        }
    }
}

/// A new entry of `entrant` in `event` at `now`: for a draw of private entrants, a fresh key and
/// its receipt (a fair open's late place is signed with its rank once it has one).
async fn new_entry(
    receipts: &StagedSecret<ReceiptKey>,
    event: &Event,
    user: &UserId,
    email: &crate::domain::Email,
    now: OffsetDateTime,
) -> Result<(Entrant, Option<Arc<crate::domain::key_rotation::Staged<ReceiptKey>>>), ApiError> {
    let mut entrant = Entrant { user: user.clone(), email: email.clone(), late: None, key: None, receipt: None };
    if event.draw.as_ref().map(|d| d.algorithm) != Some(Algorithm::V2) {
        return Ok((entrant, None));
    }
    let signer = receipts.get().await?;
    let key = EntryKey::generate();
    entrant.receipt = Some(signer.current.issue(&event.id, &key.leaf(&event.id), &rfc3339(now), None));
    entrant.key = Some(key);
    Ok((entrant, Some(signer)))
}

impl Entries {
    pub fn new(store: Store, rebuilder: Rebuilder, receipts: StagedSecret<ReceiptKey>) -> Self {
        Self { store, rebuilder, receipts }
    }

    /// Enters the caller: `201` the first time, `200` with the same entry after.
    pub async fn register(&self, id: &EventId, caller: &Caller, work: &Work) -> Result<(EntryView, bool), ApiError> {
        let event = event_in(&self.rebuilder, id, SaleMode::Ballot).await?;
        let email = caller.verified_email()?;
        work.check(&event, &caller.user)?;
        let now = OffsetDateTime::now_utc();
        // Entries close when the release fixed (the draw closes the registration in DynamoDB
        // too, before it reads the list).
        if now >= event.entries_close().unwrap_or(event.sale_end) {
            return Err(ApiError::RegistrationClosed);
        }
        let (entrant, _) = new_entry(&self.receipts, &event, &caller.user, email, now).await?;
        let (entry, new) = match self.store.register(id, event.entry_shards(), &entrant, now).await? {
            Registered::Entered => {
                (StoredEntry { entered_at: rfc3339(now), late: None, key: entrant.key, receipt: entrant.receipt }, true)
            }
            Registered::Already(entry) => (entry, false),
            Registered::Closed | Registered::Late(_) => return Err(ApiError::RegistrationClosed),
        };
        Ok((EntryView::entered(id, entry), new))
    }
}

/// A complete draw as this environment keeps it: its terms as published, the draw in compact form
/// (two hashes and two indices an entrant: a million entrants are some 72 MB), and the users of
/// the places a ballot lays down (never published: the audit checks them).
pub struct Drawn {
    /// The published terms, without places: [`Drawn::page`] adds them.
    pub terms: Published,
    compact: draw::Compact,
    /// The users of the first places (a ballot's winners and waiting places), in place order.
    placed: Vec<UserId>,
    /// `ticket-draw/v1`'s entrants (entrant index -> user), which it publishes; empty for v2,
    /// whose leaves name nobody.
    v1_users: Vec<UserId>,
    pub drawn_at: OffsetDateTime,
}

impl Drawn {
    pub fn algorithm(&self) -> Algorithm {
        self.compact.algorithm
    }

    /// How many entrants the draw shuffled.
    pub fn len(&self) -> usize {
        self.compact.len()
    }

    pub fn is_empty(&self) -> bool {
        self.compact.is_empty()
    }

    /// What `GET /events/{id}/draw?from=` shows: v2 a page of leaves from place `from`; v1 the
    /// whole draw with its user ids, as it always was.
    pub fn page(&self, from: usize) -> Published {
        let user_at = |p: usize| self.compact.at(p).map(|i| self.v1_users[i].as_str().to_owned());
        match self.algorithm() {
            Algorithm::V1 => Published {
                entrants: self.v1_users.iter().map(|u| u.as_str().to_owned()).collect(),
                order: (0..self.len()).filter_map(user_at).collect(),
                ..self.terms.clone()
            },
            Algorithm::V2 => {
                let (from, to, next) = draw::page_bounds(from, self.len());
                let leaves = self.compact.leaves();
                Published {
                    from: Some(from as u64),
                    next: next.map(|n| n as u64),
                    order: (from..to).filter_map(|p| self.compact.at(p)).map(|i| hex::encode(&leaves[i])).collect(),
                    ..self.terms.clone()
                }
            }
        }
    }

    /// The draw as the audit checks against it, with the users of its first `n` places.
    pub fn order(&self, n: usize) -> crate::domain::audit::DrawnOrder<'_> {
        crate::domain::audit::DrawnOrder {
            algorithm: self.algorithm().name(),
            entrants: self.len(),
            first: self.placed.iter().take(n).collect(),
        }
    }

    /// The user's entrant index: v1 by their id (entrants are in id order), v2 by the leaf of
    /// their own entry's key.
    fn index_of(&self, event: &EventId, user: &UserId, entry: &StoredEntry) -> Option<usize> {
        match self.algorithm() {
            Algorithm::V1 => self.v1_users.binary_search_by(|u| u.as_str().cmp(user.as_str())).ok(),
            Algorithm::V2 => self.compact.leaves().binary_search(&entry.key.as_ref()?.leaf_bytes(event)).ok(),
        }
    }

    /// The user's place, 1 first.
    fn place_of(&self, event: &EventId, user: &UserId, entry: &StoredEntry) -> Option<usize> {
        self.compact.place_of(self.index_of(event, user, entry)?).map(|p| p + 1)
    }

    /// The user's place (1 is first) and the path from their leaf to the root.
    fn place_and_proof(&self, event: &EventId, user: &UserId, entry: &StoredEntry) -> Option<(usize, Vec<ProofStep>)> {
        let index = self.index_of(event, user, entry)?;
        Some((self.compact.place_of(index)? + 1, self.compact.proof(index)?))
    }
}

/// The draw of the roll's entrants with the revealed secret and round, as `event` publishes its
/// terms: the entrants in entrant order (v1: by user id; v2: by leaf), the compact draw, and their
/// users in that order.
fn draw_of(
    event: &Event,
    mut roll: Vec<RollEntry>,
    revealed: &Revealed,
) -> Result<(Published, draw::Compact, Vec<UserId>), ApiError> {
    let terms = event.draw.as_ref().ok_or(ApiError::NotABallot)?;
    let algorithm = terms.algorithm;
    match algorithm {
        Algorithm::V1 => roll.sort_unstable_by(|a, b| a.user.as_str().cmp(b.user.as_str())),
        Algorithm::V2 => roll.sort_unstable_by_key(|e| e.leaf),
    }
    let n = roll.len();
    let (mut leaves, mut users) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for RollEntry { leaf, user } in roll {
        leaves.push(leaf);
        users.push(user);
    }
    let compact = draw::Compact::draw(algorithm, leaves, &revealed.secret, &revealed.randomness);
    let published = Published {
        algorithm: algorithm.name().to_owned(),
        event_id: Some(event.id.as_str().to_owned()),
        commitment: terms.commitment.clone(),
        secret: hex::encode(&revealed.secret),
        root: hex::encode(&compact.root()),
        beacon: revealed.beacon.clone(),
        entrants: Vec::new(),
        entrant_count: Some(n as u64),
        from: None,
        next: None,
        order: Vec::new(),
        entries_close: event.entries_close().map(rfc3339),
        drawn_at: None,
        capacity: Some(event.capacity),
        admission_rate: event.queue.as_ref().map(|q| q.admission_rate),
    };
    Ok((published, compact, users))
}

/// An ask's failure, with the step it failed in and the shards read so far (its reply, a `503`,
/// says nothing of either).
fn failed_in(step: &'static str, event: &EventId, shards_read: usize) -> impl FnOnce(ApiError) -> ApiError {
    move |e| {
        tracing::warn!(event_id = %event, step, shards_read, error = %e, "an ask of a draw failed; the next goes on");
        e
    }
}

/// One shard of the event's entries as the draw takes them: each entrant as its leaf (v1: of the
/// user id; v2: of the entry's key) and its user.
async fn roll_of_shard(
    store: &Store,
    event: &Event,
    shards: EntryShards,
    shard: u32,
) -> Result<Vec<RollEntry>, ApiError> {
    let algorithm = event.draw.as_ref().ok_or(ApiError::NotABallot)?.algorithm;
    let mut roll = Vec::new();
    for (user, key) in store.shard_entrants(&event.id, shards, shard).await? {
        let leaf = match (algorithm, &key) {
            (Algorithm::V1, _) => algorithm.leaf(user.as_str()),
            (Algorithm::V2, Some(key)) => Some(key.leaf_bytes(&event.id)),
            (Algorithm::V2, None) => None,
        };
        let Some(leaf) = leaf else {
            tracing::error!(event_id = %event.id, "an entry of a private draw has no key");
            return Err(ApiError::Busy);
        };
        roll.push(RollEntry { leaf, user });
    }
    Ok(roll)
}

/// The users of the draw's first `n` places, in place order.
fn placed(compact: &draw::Compact, users: &[UserId], n: usize) -> Vec<UserId> {
    (0..n.min(compact.len())).filter_map(|p| compact.at(p)).map(|i| users[i].clone()).collect()
}

/// The head of the event's complete draw, as its pages carry it (docs/FAIRNESS.md section 6b),
/// from the event and the draw's record alone (no entry is read): `None` until the draw is
/// complete. Signed by the receipt key where it is published (`GET /events/{id}/receipt-key`),
/// with the ids of the keys it vouches for.
pub async fn draw_head(store: &Store, event: &Event) -> Result<Option<DrawHead>, ApiError> {
    let Some(terms) = &event.draw else { return Ok(None) };
    let record = match store.ballot_state(&event.id).await?.draw {
        Some(record) if record.done => record,
        _ => return Ok(None),
    };
    let beacon_round = terms.beacon.as_ref().map(|b| b.round);
    let beacon_public_key = terms.beacon.as_ref().map(|b| b.public_key.clone());
    Ok(Some(DrawHead {
        key_id: String::new(),
        event: event.id.clone(),
        algorithm: terms.algorithm.name().to_owned(),
        commitment: terms.commitment.clone(),
        root: record.root,
        entrant_count: u64::from(record.entrants),
        entries_close: rfc3339(event.entries_close().unwrap_or(event.sale_start)),
        drawn_at: rfc3339(record.drawn_at),
        capacity: event.capacity,
        admission_rate: event.queue.as_ref().map(|q| q.admission_rate),
        beacon_round,
        beacon_public_key,
        beacon_signature: record.beacon_signature,
        receipt_keys: Vec::new(),
    }))
}

/// The draws this environment has recomputed: a draw never changes once complete. When it would
/// hold more than [`DRAWS_KEPT`] draws or [`ENTRANTS_KEPT`] entrants, the draws kept longest make
/// room (not every draw at once: asking for 101 events in turn would otherwise read every roll
/// again on every request).
#[derive(Clone, Default)]
pub struct DrawBook {
    drawn: Arc<Mutex<Kept>>,
    /// One build of a draw at a time per event: the requests that find it missing meanwhile (a
    /// fair open's whole queue polling at its draw) wait for that one, not each read the roll.
    building: Arc<Mutex<HashMap<EventId, Arc<tokio::sync::Mutex<()>>>>>,
}

/// The draws kept, and their events in the order they were kept.
type Kept = (HashMap<EventId, Arc<Drawn>>, std::collections::VecDeque<EventId>);

impl DrawBook {
    fn get(&self, id: &EventId) -> Option<Arc<Drawn>> {
        self.drawn.lock().expect("draws").0.get(id).cloned()
    }

    /// The event's build lock (held while its draw is built; a build cut off lets the next in).
    fn builder(&self, id: &EventId) -> Arc<tokio::sync::Mutex<()>> {
        let mut building = self.building.lock().expect("builds");
        // Locks of draws already kept are of no use: dropped whenever one is handed out.
        let kept = &self.drawn.lock().expect("draws").0;
        building.retain(|event, _| !kept.contains_key(event));
        building.entry(id.clone()).or_default().clone()
    }

    fn keep(&self, id: &EventId, drawn: Arc<Drawn>) {
        let (book, kept) = &mut *self.drawn.lock().expect("draws");
        if book.insert(id.clone(), drawn).is_none() {
            kept.push_back(id.clone());
        }
        while kept.len() > DRAWS_KEPT {
            if let Some(oldest) = kept.pop_front() {
                book.remove(&oldest);
            }
        }
    }

    /// Makes room for a draw of `entrants` about to be built: the draws kept longest leave until
    /// those left and it are within [`ENTRANTS_KEPT`] (all of them, for a draw that size alone).
    fn make_room(&self, entrants: usize) {
        let (book, kept) = &mut *self.drawn.lock().expect("draws");
        while book.values().map(|d| d.len()).sum::<usize>() + entrants > ENTRANTS_KEPT {
            let Some(oldest) = kept.pop_front() else { return };
            book.remove(&oldest);
        }
    }
}

/// Complete draws remembered per execution environment...
const DRAWS_KEPT: usize = 100;
/// ... and their entrants at most, the one being built counted: a v2 draw keeps some 72 bytes an
/// entrant (two hashes, two indices) and building one holds about 160 more until it is made, so a
/// 256 MB function holds a million-entrant draw and builds it, and a draw that size alone.
const ENTRANTS_KEPT: usize = 1_000_000;

/// `GET /events/{id}/draw` and `GET /events/{id}/entry` (query).
#[derive(Clone)]
pub struct DrawView {
    store: Store,
    rebuilder: Rebuilder,
    book: DrawBook,
}

impl DrawView {
    pub fn new(store: Store, rebuilder: Rebuilder) -> Self {
        Self { store, rebuilder, book: DrawBook::default() }
    }

    /// The event's draw as it publishes it: `409 NOT_DRAWN` until the draw is complete.
    pub async fn published(&self, id: &EventId) -> Result<Arc<Drawn>, ApiError> {
        if let Some(drawn) = self.book.get(id) {
            return Ok(drawn);
        }
        let event = drawing_event(&self.rebuilder, id).await?;
        self.published_of(&event).await?.ok_or(ApiError::NotDrawn)
    }

    /// A complete draw, recomputed from what is stored; `None` until it is complete.
    pub async fn published_of(&self, event: &Event) -> Result<Option<Arc<Drawn>>, ApiError> {
        if let Some(drawn) = self.book.get(&event.id) {
            return Ok(Some(drawn));
        }
        let state = self.store.ballot_state(&event.id).await?;
        let record = match state.draw {
            Some(record) if record.done => record,
            _ => return Ok(None),
        };
        // Complete: built once here, whoever else asks meanwhile.
        let builder = self.book.builder(&event.id);
        let _building = builder.lock().await;
        if let Some(drawn) = self.book.get(&event.id) {
            return Ok(Some(drawn));
        }
        let terms = event.draw.as_ref().ok_or(ApiError::NotABallot)?;
        // Room first: what this environment keeps and what it builds now stay within the book.
        self.book.make_room(record.entrants as usize);
        let stored = |e: &dyn std::fmt::Display| {
            tracing::error!(event_id = %event.id, error = %e, "a stored draw does not check out");
            ApiError::Busy
        };
        let revealed = terms.reveal(&record.secret, record.beacon_signature.as_deref()).map_err(|e| stored(&e))?;
        let shards = event.entry_shards();
        let roll = if state.rolled.len() == shards.get() as usize {
            self.store.roll(&event.id, shards).await?
        } else {
            // A draw completed before draws kept a roll: its entries, read as the draw read them.
            let reads = shards.all().map(|shard| roll_of_shard(&self.store, event, shards, shard));
            let read: Vec<Vec<RollEntry>> = stream::iter(reads).buffer_unordered(ROLL_WAVE).try_collect().await?;
            read.into_iter().flatten().collect()
        };
        let (mut terms, compact, users) = draw_of(event, roll, &revealed).map_err(|e| stored(&e))?;
        if terms.root != record.root {
            return Err(stored(&"the roll's root is not the one the draw recorded"));
        }
        terms.drawn_at = Some(rfc3339(record.drawn_at));
        let placed = placed(&compact, &users, laid_down(event, compact.len()));
        let v1_users = if compact.algorithm == Algorithm::V1 { users } else { Vec::new() };
        let drawn = Arc::new(Drawn { terms, compact, placed, v1_users, drawn_at: record.drawn_at });
        self.book.keep(&event.id, drawn.clone());
        Ok(Some(drawn))
    }

    /// The caller's entry (a ballot's, a fair open's place), and after the draw their position
    /// and inclusion proof: the path from what they are drawn as (v2: their leaf) to the root.
    pub async fn entry(&self, id: &EventId, caller: &Caller) -> Result<EntryView, ApiError> {
        let event = drawing_event(&self.rebuilder, id).await?;
        let entry = self.store.entry(id, event.entry_shards(), &caller.user).await?.ok_or(ApiError::NotEntered)?;
        let drawn = match self.published(id).await {
            Ok(drawn) => drawn,
            Err(ApiError::NotDrawn) => return Ok(EntryView::entered(id, entry)),
            Err(e) => return Err(e),
        };
        let placed = drawn.place_and_proof(id, &caller.user, &entry);
        let mut view = EntryView::entered(id, entry);
        view.status = "DRAWN";
        if event.sale_mode == SaleMode::Ballot {
            view.won = placed.as_ref().map(|(p, _)| *p <= event.capacity as usize);
        }
        view.draw_position = placed.as_ref().map(|(p, _)| *p);
        view.root = Some(drawn.terms.root.clone());
        view.proof = placed.map(|(_, proof)| proof);
        Ok(view)
    }
}

/// The organiser's reveal: the secret committed to at release, and the named beacon round's
/// signature when the release named one.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reveal {
    pub secret: String,
    #[serde(default)]
    pub beacon_signature: Option<String>,
}

/// How many of a ballot's draw order are laid down: the winners, then as many waiting places as
/// the event's waitlist holds (`waitlist_size`, the capacity unless the release set it). Every
/// entrant's place is in the published draw and their entry either way; a waiting place is a
/// durable write, and one a cancellation can never reach costs a million of them in a large draw.
fn laid_down(event: &Event, entrants: usize) -> usize {
    entrants.min(event.capacity as usize + event.waitlist_size as usize)
}

/// What a draw did, as its reply says.
#[derive(Debug, Serialize)]
pub struct DrawSummary {
    pub event_id: EventId,
    pub sale_mode: SaleMode,
    pub algorithm: &'static str,
    pub commitment: String,
    pub root: String,
    pub entrants: u32,
    /// A ballot's: the orders given, the entrants waiting.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub winners: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<usize>,
    /// A fair open's: when its queue admits its first wave.
    #[serde(with = "time::serde::rfc3339::option", skip_serializing_if = "Option::is_none")]
    pub admits_from: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339")]
    pub drawn_at: OffsetDateTime,
}

/// A complete draw's summary, from the event and its record alone.
fn summary(event: &Event, record: &DrawRecord) -> DrawSummary {
    let ballot = event.sale_mode == SaleMode::Ballot;
    let laid = laid_down(event, record.entrants as usize);
    let winners = laid.min(event.capacity as usize);
    DrawSummary {
        event_id: event.id.clone(),
        sale_mode: event.sale_mode,
        algorithm: event.draw.as_ref().map_or(Algorithm::V1, |d| d.algorithm).name(),
        commitment: event.draw.as_ref().map(|d| d.commitment.clone()).unwrap_or_default(),
        root: record.root.clone(),
        entrants: record.entrants,
        winners: ballot.then_some(winners),
        waiting: ballot.then_some(laid - winners),
        admits_from: event.queue.as_ref().map(|_| record.drawn_at),
        drawn_at: record.drawn_at,
    }
}

/// A draw not finished by this ask: how far it got. Asking again goes on from there.
#[derive(Debug, Serialize)]
pub struct DrawProgress {
    pub event_id: EventId,
    /// `DRAWING`.
    pub status: &'static str,
    /// Shards of the entries read into the draw's roll, of all of them.
    pub shards_read: usize,
    pub shards: u32,
    /// A ballot's places laid down so far (its winners first).
    pub places_laid: usize,
}

impl DrawProgress {
    fn of(event: &Event, shards_read: usize, places_laid: usize) -> Self {
        Self {
            event_id: event.id.clone(),
            status: "DRAWING",
            shards_read,
            shards: event.entry_shards().get(),
            places_laid,
        }
    }
}

/// What one ask of a draw did: the draw complete, or how far it is.
#[derive(Debug)]
pub enum DrawStep {
    Done(DrawSummary),
    Drawing(DrawProgress),
}

/// `POST /admin/events/{id}/draw` (release).
#[derive(Clone)]
pub struct Draw {
    store: Store,
    gate: Gate,
    rebuilder: Rebuilder,
    courier: Courier,
    /// How long one ask reads the entries, and lays places down ([`ROLL_FOR`], [`LAY_FOR`]).
    roll_for: Duration,
    lay_for: Duration,
}

impl Draw {
    pub fn new(store: Store, gate: Gate, rebuilder: Rebuilder, courier: Courier) -> Self {
        Self { store, gate, rebuilder, courier, roll_for: ROLL_FOR, lay_for: LAY_FOR }
    }

    /// The same draw, one ask doing at most a wave of the read, or a chunk of the lay-down, past
    /// these (a test's draw in many asks).
    pub fn paced(self, roll_for: Duration, lay_for: Duration) -> Self {
        Self { roll_for, lay_for, ..self }
    }

    /// Draws the ballot, or goes on with a draw left unfinished; a complete draw is answered
    /// again from its record. One ask reads shards of the entries into the roll for `roll_for`,
    /// draws once the roll is complete, and lays chunks down until `lay_for`; what it has not
    /// done it says ([`DrawStep::Drawing`]), and the next ask goes on from there.
    pub async fn draw(&self, id: &EventId, reveal: &Reveal, now: OffsetDateTime) -> Result<DrawStep, ApiError> {
        let began = Instant::now();
        let event = drawing_event(&self.rebuilder, id).await?;
        let terms = event.draw.as_ref().ok_or(ApiError::NotABallot)?;
        if now < event.sale_start {
            return Err(ApiError::DrawTooEarly { from: rfc3339(event.sale_start) });
        }
        // The reveal is checked before anything changes: a wrong secret closes nothing.
        let revealed = terms
            .reveal(&reveal.secret, reveal.beacon_signature.as_deref())
            .map_err(|e| ApiError::BadReveal(e.to_string()))?;
        let state = self.store.ballot_state(id).await?;
        if let Some(record) = &state.draw
            && record.done
        {
            return Ok(DrawStep::Done(summary(&event, record)));
        }
        if state.draw.is_none() {
            self.store.close_registration(id, now).await?;
        }
        // Once the registration is closed the entries are all there will be: each shard read
        // into the roll is read for good.
        let shards = event.entry_shards();
        let mut rolled = state.rolled.clone();
        let unread: Vec<u32> = shards.all().filter(|s| !rolled.contains(s)).collect();
        for (i, wave) in unread.chunks(ROLL_WAVE).enumerate() {
            // Each ask reads a wave at least.
            if i > 0 && began.elapsed() >= self.roll_for {
                return Ok(DrawStep::Drawing(DrawProgress::of(&event, rolled.len(), 0)));
            }
            // The shards read are counted even when another of the wave failed: the next ask
            // reads only what is left.
            let event = &event;
            let read = futures::future::join_all(wave.iter().map(|&shard| async move {
                let roll = roll_of_shard(&self.store, event, shards, shard).await?;
                self.store.write_roll(id, shard, roll).await?;
                Ok::<_, ApiError>(shard)
            }))
            .await;
            let done: Vec<u32> = read.iter().filter_map(|r| r.as_ref().ok().copied()).collect();
            self.store.shards_rolled(id, &done).await?;
            rolled.extend(&done);
            if let Some(Err(e)) = read.into_iter().find(Result::is_err) {
                return Err(failed_in("reading the entries", id, rolled.len())(e));
            }
        }
        if !unread.is_empty() && began.elapsed() >= self.roll_for {
            return Ok(DrawStep::Drawing(DrawProgress::of(&event, rolled.len(), 0)));
        }
        // The secret the commitment fixes and the named round's one signature give the recorded
        // draw again.
        let roll =
            self.store.roll(id, shards).await.map_err(|e| failed_in("reading the roll", id, rolled.len())(e.into()))?;
        let (drawn, compact, users) = draw_of(&event, roll, &revealed)?;
        let record = match state.draw {
            // A draw asked again lays down the recorded draw: the roll's root must be its.
            Some(record) if record.root != drawn.root => {
                tracing::error!(event_id = %id, "the roll's root is not the one the draw recorded");
                return Err(ApiError::Busy);
            }
            Some(record) => record,
            None => {
                let record = DrawRecord {
                    secret: drawn.secret.clone(),
                    beacon_signature: reveal.beacon_signature.clone(),
                    root: drawn.root.clone(),
                    entrants: compact.len() as u32,
                    drawn_at: now,
                    done: false,
                    chunks_laid: 0,
                };
                // A concurrent draw recorded first: its record stands (the same secret and round
                // give the same draw).
                self.store.record_draw(id, &record).await?
            }
        };
        // Only the places laid down need their users (and, chunk by chunk, their addresses).
        let in_order = placed(&compact, &users, laid_down(&event, compact.len()));
        drop((users, compact));
        if event.sale_mode == SaleMode::Ballot {
            // A fair open's draw hands out nothing: its queue admits in the draw's order.
            let laid = self.lay_down(&event, &in_order, &record, began).await.map_err(failed_in(
                "laying down",
                id,
                rolled.len(),
            ))?;
            if laid < in_order.len() {
                return Ok(DrawStep::Drawing(DrawProgress::of(&event, rolled.len(), laid)));
            }
        }
        self.store.draw_done(id, now).await?;
        tracing::info!(event_id = %id, entrants = record.entrants, mode = event.sale_mode.as_str(), "drawn");
        Ok(DrawStep::Done(summary(&event, &record)))
    }

    /// Lays the draw down, chunk by chunk in draw order, from the first not laid yet until
    /// `lay_for` after `began`: the winners' orders (outbox, then the queue), the others' places
    /// (DynamoDB first, then the cache, as a join does). Each chunk laid is counted on the event's
    /// item, so the next ask goes on from the next one. How many places are laid down.
    async fn lay_down(
        &self,
        event: &Event,
        order: &[UserId],
        record: &DrawRecord,
        began: Instant,
    ) -> Result<usize, ApiError> {
        let id = &event.id;
        let created_at = rfc3339(record.drawn_at);
        let drawn_at = record.drawn_at;
        let capacity = event.capacity as usize;
        for (chunk_no, chunk) in order.chunks(DRAW_CHUNK).enumerate().skip(record.chunks_laid as usize) {
            let first = chunk_no * DRAW_CHUNK;
            // Each ask lays a chunk at least.
            if chunk_no > record.chunks_laid as usize && began.elapsed() >= self.lay_for {
                return Ok(first);
            }
            let users = chunk;
            let emails = self.store.entry_emails(id, event.entry_shards(), users).await?;
            let email = |u: &UserId| emails.get(u).ok_or(ApiError::Busy);

            let mut orders = Vec::new();
            let mut waits = Vec::new();
            for (i, user) in users.iter().enumerate() {
                let position = first + i + 1;
                if position <= capacity {
                    let order_id = OrderId::generate();
                    let head = MessageHead::new(&order_id, id, user, email(user)?, &created_at);
                    orders.push((user, order_id, head));
                } else {
                    let waiter =
                        Waiter { user: user.clone(), email: email(user)?.clone(), place: (position - capacity) as u64 };
                    waits.push((waiter, WaitHead::new(id, user, email(user)?)));
                }
            }
            // Places are durable before the cache shows them: a rebuild restores them from here.
            // Futures made first, then run: a lazily mapped stream trips the compiler's
            // higher-ranked lifetime check in a Send future.
            let writes: Vec<_> = waits.iter().map(|(w, _)| self.store.add_waiter(id, w, drawn_at)).collect();
            let writes = stream::iter(writes).buffer_unordered(PLACE_WRITES).collect::<Vec<_>>().await;
            writes.into_iter().collect::<Result<Vec<()>, _>>()?;
            let winners: Vec<DrawWinner> =
                orders.iter().map(|(user, order_id, head)| DrawWinner { user, order_id, head }).collect();
            let waiters: Vec<DrawWaiter> =
                waits.iter().map(|(w, head)| DrawWaiter { user: &w.user, place: w.place, head }).collect();
            let mut laid = self.gate.lay_draw(id, &winners, &waiters).await?;
            if matches!(laid, DrawLaid::NotCached) {
                match self.rebuilder.rebuild(event).await? {
                    Rebuild::Done | Rebuild::Present => laid = self.gate.lay_draw(id, &winners, &waiters).await?,
                    _ => return Err(ApiError::Busy),
                }
            }
            let DrawLaid::Laid { granted, written } = laid else { return Err(ApiError::Busy) };
            let heads: HashMap<&OrderId, &MessageHead> =
                orders.iter().map(|(_, order_id, head)| (order_id, head)).collect();
            let deliveries: Vec<Delivery> = granted
                .iter()
                .filter_map(|held| {
                    let head = heads.get(&held.order)?;
                    Some(Delivery {
                        event: id.clone(),
                        order_id: held.order.clone(),
                        message: head.complete(held.ticket_no),
                        written: written.clone(),
                        generation: None,
                    })
                })
                .collect();
            let sends: Vec<_> = deliveries.iter().map(|d| self.courier.deliver(d)).collect();
            let sent = stream::iter(sends).buffer_unordered(PLACE_WRITES).collect::<Vec<bool>>().await;
            if sent.contains(&false) {
                // In the outbox, not yet durable elsewhere: reconcile re-drives it, and the
                // organiser's retry finishes the draw.
                return Err(ApiError::Busy);
            }
            self.store.chunks_laid(id, chunk_no as u32 + 1).await?;
        }
        Ok(order.len())
    }
}

/// A fair open's pre-queue (grab): `POST /events/{id}/queue` joins it, `GET /events/{id}/queue`
/// tells the place, and once the place is admitted, an admission token for verify-hash.
#[derive(Clone)]
pub struct Queue {
    store: Store,
    rebuilder: Rebuilder,
    draws: DrawView,
    key: StagedSecret<HashKey>,
    receipts: StagedSecret<ReceiptKey>,
}

/// A user's place in a fair open's queue.
#[derive(Debug, Serialize)]
pub struct QueueView {
    pub event_id: EventId,
    /// `QUEUED` (before the draw: the place is not known yet), `WAITING` (a place, admitted at
    /// `admitted_at`) or `ADMITTED` (with a token for verify-hash).
    pub status: &'static str,
    pub entered_at: String,
    /// As an entry's; its inclusion proof is on `GET /events/{id}/entry` after the draw.
    #[serde(flatten)]
    pub shown: EntryShown,
    /// Before the draw: when the places taken so far are shuffled.
    #[serde(with = "time::serde::rfc3339::option", skip_serializing_if = "Option::is_none")]
    pub shuffle_at: Option<OffsetDateTime>,
    /// After the draw: the place (1 is first; a late arrival after every shuffled place), and
    /// when that place is admitted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub late: Option<bool>,
    #[serde(with = "time::serde::rfc3339::option", skip_serializing_if = "Option::is_none")]
    pub admitted_at: Option<OffsetDateTime>,
    /// Once admitted: the token verify-hash requires (`?admission=`), until `admission_expires_at`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admission: Option<String>,
    #[serde(with = "time::serde::rfc3339::option", skip_serializing_if = "Option::is_none")]
    pub admission_expires_at: Option<OffsetDateTime>,
}

impl Queue {
    pub fn new(
        store: Store,
        rebuilder: Rebuilder,
        key: StagedSecret<HashKey>,
        receipts: StagedSecret<ReceiptKey>,
    ) -> Self {
        let draws = DrawView::new(store.clone(), rebuilder.clone());
        Self { store, rebuilder, draws, key, receipts }
    }

    /// Joins the caller: `201` the first time, `200` with the same place after. Before the draw
    /// the place is among those it shuffles; after it, behind them in arrival order.
    pub async fn join(&self, id: &EventId, caller: &Caller, work: &Work) -> Result<(QueueView, bool), ApiError> {
        let event = event_in(&self.rebuilder, id, SaleMode::FairOpen).await?;
        let terms = event.queue.as_ref().ok_or(ApiError::NotAFairOpen)?;
        let email = caller.verified_email()?;
        work.check(&event, &caller.user)?;
        let now = OffsetDateTime::now_utc();
        if now < terms.opens {
            return Err(ApiError::QueueNotOpen { from: rfc3339(terms.opens) });
        }
        if now >= event.sale_end {
            return Err(ApiError::SaleEnded);
        }
        let (entrant, signer) = new_entry(&self.receipts, &event, &caller.user, email, now).await?;
        // The shuffle takes the places joined before the entries closed (the open, fixed at
        // release), however late the draw runs: a join after it queues behind, as after the draw.
        if event.entries_close().is_some_and(|close| now >= close) {
            self.store.close_registration(id, now).await?;
        }
        let new = match self.store.register(id, event.entry_shards(), &entrant, now).await? {
            Registered::Entered | Registered::Late(_) => true,
            Registered::Already(_) => false,
            Registered::Closed => {
                // Behind the shuffled places: the receipt names the rank it got, and a time not
                // before the close (another request may have closed the registration a moment
                // before this one's clock reached it: a late place is never dated before it).
                let leaf = entrant.key.as_ref().map(|k| k.leaf(id));
                let now = event.entries_close().map_or(now, |close| now.max(close));
                let at = rfc3339(now);
                let late = Entrant { receipt: None, ..entrant };
                let sign = |rank| match (&signer, &leaf) {
                    (Some(s), Some(leaf)) => Some(s.current.issue(id, leaf, &at, Some(rank))),
                    _ => None,
                };
                let joined = self.store.join_late(id, event.entry_shards(), &late, now, sign).await?;
                matches!(joined, Registered::Late(_) | Registered::Entered)
            }
        };
        Ok((self.place_in(&event, caller, now).await?, new))
    }

    /// The caller's place, and once it is admitted a fresh admission token.
    pub async fn place(&self, id: &EventId, caller: &Caller) -> Result<QueueView, ApiError> {
        let event = event_in(&self.rebuilder, id, SaleMode::FairOpen).await?;
        self.place_in(&event, caller, OffsetDateTime::now_utc()).await
    }

    async fn place_in(&self, event: &Event, caller: &Caller, now: OffsetDateTime) -> Result<QueueView, ApiError> {
        let terms = event.queue.as_ref().ok_or(ApiError::NotAFairOpen)?;
        let entry =
            self.store.entry(&event.id, event.entry_shards(), &caller.user).await?.ok_or(ApiError::NotQueued)?;
        let late = entry.late;
        let drawn = self.draws.published_of(event).await?;
        let place = drawn.as_ref().and_then(|d| d.place_of(&event.id, &caller.user, &entry));
        let mut view = QueueView {
            event_id: event.id.clone(),
            status: "QUEUED",
            shown: EntryShown::of(&event.id, &entry),
            entered_at: entry.entered_at,
            shuffle_at: Some(event.sale_start),
            position: None,
            late: None,
            admitted_at: None,
            admission: None,
            admission_expires_at: None,
        };
        let Some(drawn) = drawn else { return Ok(view) };
        let position = match late {
            Some(rank) => drawn.len() as u64 + rank,
            None => place.ok_or(ApiError::Busy)? as u64,
        };
        let admitted_at = sale_mode::admitted_at(drawn.drawn_at, terms.admission_rate, position);
        view.shuffle_at = None;
        view.position = Some(position);
        view.late = Some(late.is_some());
        view.admitted_at = Some(admitted_at);
        view.status = "WAITING";
        if now >= admitted_at {
            let expires = now + ADMISSION_TTL;
            view.status = "ADMITTED";
            view.admission = Some(self.key.get().await?.current.admit(&event.id, &caller.user, epoch_ms(expires)));
            view.admission_expires_at = Some(expires);
        }
        Ok(view)
    }
}
