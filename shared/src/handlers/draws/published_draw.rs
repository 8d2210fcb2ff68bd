//! `GET /events/{id}/draw` (query): anyone reads an event's complete draw, page by page, with what
//! it takes to recompute it (docs/FAIRNESS.md section 7). A draw never changes once complete: each
//! environment makes it once from the stored roll and keeps it, and the same draw gives an
//! entrant their place and proof, a fair open's queue its admissions, and the audit the users of
//! the places laid down.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use futures::{StreamExt, TryStreamExt, stream};
use time::OffsetDateTime;

use super::{
    draw::laid_down,
    drawing_event,
    roll::{ROLL_WAVE, draw_of, placed, roll_of_shard},
};
use crate::{
    domain::{
        Event, EventId, UserId,
        draw::{self, Algorithm, ProofStep, Published},
        event::rfc3339,
        hex,
    },
    http::ApiError,
    recovery::Rebuilder,
    store::{
        Store,
        draws::{RollEntry, StoredEntry},
    },
};

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
    pub(super) fn place_of(&self, event: &EventId, user: &UserId, entry: &StoredEntry) -> Option<usize> {
        self.compact.place_of(self.index_of(event, user, entry)?).map(|p| p + 1)
    }

    /// The user's place (1 is first) and the path from their leaf to the root.
    pub(super) fn place_and_proof(
        &self,
        event: &EventId,
        user: &UserId,
        entry: &StoredEntry,
    ) -> Option<(usize, Vec<ProofStep>)> {
        let index = self.index_of(event, user, entry)?;
        Some((self.compact.place_of(index)? + 1, self.compact.proof(index)?))
    }
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

/// `GET /events/{id}/draw` (query); the draw an entry is shown against (`GET /events/{id}/entry`,
/// [`super::entry`]) and a fair open's queue admits by ([`super::queue`]).
#[derive(Clone)]
pub struct DrawView {
    /// Also the entry route's, which reads an entry beside its draw (in `entry.rs`).
    pub(super) store: Store,
    pub(super) rebuilder: Rebuilder,
    book: DrawBook,
}

impl DrawView {
    pub fn new(store: Store, rebuilder: Rebuilder) -> Self {
        Self { store, rebuilder, book: DrawBook::default() }
    }

    /// The event's draw as it publishes it: `409 NOT_DRAWN` until the draw is complete.
    /// The route's reply: the page of the published draw from `?from=` (0 when not given).
    pub async fn page_of(&self, req: &lambda_http::Request) -> Result<Published, ApiError> {
        let from = match crate::http::reply::query_param(req, "from") {
            None => 0,
            Some(v) => v
                .parse::<usize>()
                .map_err(|_| ApiError::BadRequest("from must be a place's index, a whole number from 0".into()))?,
        };
        Ok(self.published(&crate::http::reply::event_id(req)?).await?.page(from))
    }

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
}
