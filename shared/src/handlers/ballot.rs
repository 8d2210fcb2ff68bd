//! A ballot's routes (docs/DESIGN.md section 11): a user registers (`POST /events/{id}/entry`, in
//! grab) and sees their entry (`GET /events/{id}/entry`, in query); anyone reads the published
//! draw (`GET /events/{id}/draw`, in query); the organiser draws
//! (`POST /admin/events/{id}/draw`, in release).
//!
//! The draw reveals the secret committed at release, closes the registration (DynamoDB), reads
//! every entry, records the draw on the event's item, then lays it down in the cache chunk by
//! chunk (`draw.lua`): each winner's order goes to the outbox and on to the queue like a grab's,
//! each other entrant's place is written to DynamoDB and the cache in draw order. Every step is
//! idempotent, so a draw interrupted anywhere is finished by asking for it again.

use std::sync::{Arc, Mutex};

use futures::{StreamExt, stream};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::{
    delivery::{Courier, Delivery},
    domain::{
        Event, EventId, OrderId, UserId, Waiter,
        ballot::{self, Entrant, SaleMode},
        draw::{self, ProofStep, Published},
        event::rfc3339,
        order::{MessageHead, WaitHead},
    },
    gate::{DrawLaid, DrawWaiter, DrawWinner, Gate},
    http::{ApiError, Caller},
    recovery::{Rebuild, Rebuilder},
    store::{
        Store,
        ballot::{DrawRecord, Registered},
    },
};

/// Entrants one `draw.lua` call lays down: a few hundred keeps each script well under a
/// millisecond of the event's slot.
const DRAW_CHUNK: usize = 500;
/// Waiting places written to DynamoDB at once.
const PLACE_WRITES: usize = 16;

/// The event, known and a ballot.
async fn ballot_event(rebuilder: &Rebuilder, id: &EventId) -> Result<Event, ApiError> {
    let event = rebuilder.event(id).await?.ok_or(ApiError::EventNotFound)?;
    if event.sale_mode != SaleMode::Ballot {
        return Err(ApiError::NotABallot);
    }
    Ok(event)
}

/// `POST /events/{id}/entry` (grab): one entry per user, until the draw closes the registration.
#[derive(Clone)]
pub struct Entries {
    store: Store,
    rebuilder: Rebuilder,
}

/// A user's entry, as the entry routes show it.
#[derive(Debug, Serialize)]
pub struct EntryView {
    pub event_id: EventId,
    pub status: &'static str,
    pub entered_at: String,
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

impl Entries {
    pub fn new(store: Store, rebuilder: Rebuilder) -> Self {
        Self { store, rebuilder }
    }

    /// Enters the caller: `201` the first time, `200` with the same entry after.
    pub async fn register(&self, id: &EventId, caller: &Caller) -> Result<(EntryView, bool), ApiError> {
        let event = ballot_event(&self.rebuilder, id).await?;
        let email = caller.verified_email()?;
        let now = OffsetDateTime::now_utc();
        if now >= event.sale_end {
            return Err(ApiError::RegistrationClosed);
        }
        let entrant = Entrant { user: caller.user.clone(), email: email.clone() };
        let (entered_at, new) = match self.store.register(id, &entrant, now).await? {
            Registered::Entered => (rfc3339(now), true),
            Registered::Already { entered_at } => (entered_at, false),
            Registered::Closed => return Err(ApiError::RegistrationClosed),
        };
        let view = EntryView {
            event_id: id.clone(),
            status: "ENTERED",
            entered_at,
            draw_position: None,
            won: None,
            root: None,
            proof: None,
        };
        Ok((view, new))
    }
}

/// The published draws this environment has recomputed: a draw never changes once complete.
#[derive(Clone, Default)]
pub struct DrawBook {
    drawn: Arc<Mutex<std::collections::HashMap<EventId, Arc<Published>>>>,
}

/// Complete draws remembered per execution environment.
const DRAWS_KEPT: usize = 100;

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
    pub async fn published(&self, id: &EventId) -> Result<Arc<Published>, ApiError> {
        if let Some(drawn) = self.book.drawn.lock().expect("draws").get(id) {
            return Ok(drawn.clone());
        }
        let event = ballot_event(&self.rebuilder, id).await?;
        self.published_of(&event).await?.ok_or(ApiError::NotDrawn)
    }

    /// A ballot's complete draw, recomputed from what is stored; `None` until it is complete.
    pub async fn published_of(&self, event: &Event) -> Result<Option<Arc<Published>>, ApiError> {
        if let Some(drawn) = self.book.drawn.lock().expect("draws").get(&event.id) {
            return Ok(Some(drawn.clone()));
        }
        let record = match self.store.ballot_state(&event.id).await?.draw {
            Some(record) if record.done => record,
            _ => return Ok(None),
        };
        let entrants = self.store.entrants(&event.id).await?;
        let published = Arc::new(republish(event, &record, entrants)?);
        let mut book = self.book.drawn.lock().expect("draws");
        if book.len() >= DRAWS_KEPT {
            book.clear();
        }
        book.insert(event.id.clone(), published.clone());
        Ok(Some(published))
    }

    /// The caller's entry, and after the draw their position and inclusion proof.
    pub async fn entry(&self, id: &EventId, caller: &Caller) -> Result<EntryView, ApiError> {
        let event = ballot_event(&self.rebuilder, id).await?;
        let entered_at = self.store.entry(id, &caller.user).await?.ok_or(ApiError::NotEntered)?;
        let mut view = EntryView {
            event_id: id.clone(),
            status: "ENTERED",
            entered_at,
            draw_position: None,
            won: None,
            root: None,
            proof: None,
        };
        let drawn = match self.published(id).await {
            Ok(drawn) => drawn,
            Err(ApiError::NotDrawn) => return Ok(view),
            Err(e) => return Err(e),
        };
        let me = caller.user.as_str();
        let position = drawn.order.iter().position(|u| u == me).map(|i| i + 1);
        view.status = "DRAWN";
        view.won = position.map(|p| p <= event.capacity as usize);
        view.draw_position = position;
        view.root = Some(drawn.root.clone());
        view.proof = draw::proof(&drawn.entrants, me);
        Ok(view)
    }
}

/// The draw again from what is stored: the entries, the revealed secret and the round's
/// signature (checked once more against the commitment and the chain).
fn republish(event: &Event, record: &DrawRecord, entrants: Vec<Entrant>) -> Result<Published, ApiError> {
    let terms = event.ballot.as_ref().ok_or(ApiError::NotABallot)?;
    let ids = entrants.into_iter().map(|e| e.user.as_str().to_owned()).collect();
    terms.draw(ids, &record.secret, record.beacon_signature.as_deref()).map_err(|e| {
        tracing::error!(event_id = %event.id, error = %e, "a stored draw does not check out");
        ApiError::Busy
    })
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

/// What a draw did, as its reply says.
#[derive(Debug, Serialize)]
pub struct DrawSummary {
    pub event_id: EventId,
    pub algorithm: &'static str,
    pub commitment: String,
    pub root: String,
    pub entrants: u32,
    pub winners: usize,
    pub waiting: usize,
    #[serde(with = "time::serde::rfc3339")]
    pub drawn_at: OffsetDateTime,
}

/// `POST /admin/events/{id}/draw` (release).
#[derive(Clone)]
pub struct Draw {
    store: Store,
    gate: Gate,
    rebuilder: Rebuilder,
    courier: Courier,
}

impl Draw {
    pub fn new(store: Store, gate: Gate, rebuilder: Rebuilder, courier: Courier) -> Self {
        Self { store, gate, rebuilder, courier }
    }

    /// Draws the ballot, or finishes a draw left unfinished; a complete draw is answered again.
    pub async fn draw(&self, id: &EventId, reveal: &Reveal, now: OffsetDateTime) -> Result<DrawSummary, ApiError> {
        let event = ballot_event(&self.rebuilder, id).await?;
        let terms = event.ballot.as_ref().ok_or(ApiError::NotABallot)?;
        if now < event.sale_start {
            return Err(ApiError::DrawTooEarly { from: rfc3339(event.sale_start) });
        }
        // The reveal is checked before anything changes: a wrong secret closes nothing.
        terms
            .draw(Vec::new(), &reveal.secret, reveal.beacon_signature.as_deref())
            .map_err(|e| ApiError::BadReveal(e.to_string()))?;
        let state = self.store.ballot_state(id).await?;
        let record = match state.draw {
            Some(record) => record,
            None => {
                self.store.close_registration(id, now).await?;
                let entrants = self.store.entrants(id).await?;
                let ids: Vec<String> = entrants.iter().map(|e| e.user.as_str().to_owned()).collect();
                let drawn = terms
                    .draw(ids, &reveal.secret, reveal.beacon_signature.as_deref())
                    .map_err(|e| ApiError::BadReveal(e.to_string()))?;
                let record = DrawRecord {
                    secret: drawn.secret.clone(),
                    beacon_signature: reveal.beacon_signature.clone(),
                    root: drawn.root.clone(),
                    entrants: drawn.entrants.len() as u32,
                    drawn_at: now,
                    done: false,
                };
                // A concurrent draw recorded first: its record stands (the same secret and round
                // give the same draw).
                self.store.record_draw(id, &record).await?
            }
        };
        let entrants = self.store.entrants(id).await?;
        let emails: std::collections::HashMap<UserId, crate::domain::Email> =
            entrants.iter().map(|e| (e.user.clone(), e.email.clone())).collect();
        let drawn = republish(&event, &record, entrants)?;
        let (winners, waiting) = ballot::split(&drawn.order, event.capacity);
        if !record.done {
            self.lay_down(&event, &drawn.order, &emails, record.drawn_at).await?;
            self.store.draw_done(id, now).await?;
            tracing::info!(event_id = %id, entrants = drawn.entrants.len(), winners = winners.len(), "ballot drawn");
        }
        Ok(DrawSummary {
            event_id: id.clone(),
            algorithm: draw::ALGORITHM,
            commitment: drawn.commitment,
            root: drawn.root,
            entrants: record.entrants,
            winners: winners.len(),
            waiting: waiting.len(),
            drawn_at: record.drawn_at,
        })
    }

    /// Lays the draw down, chunk by chunk in draw order: the winners' orders (outbox, then the
    /// queue), the others' places (DynamoDB first, then the cache, as a join does).
    async fn lay_down(
        &self,
        event: &Event,
        order: &[String],
        emails: &std::collections::HashMap<UserId, crate::domain::Email>,
        drawn_at: OffsetDateTime,
    ) -> Result<(), ApiError> {
        let id = &event.id;
        let created_at = rfc3339(drawn_at);
        let capacity = event.capacity as usize;
        for (chunk_no, chunk) in order.chunks(DRAW_CHUNK).enumerate() {
            let first = chunk_no * DRAW_CHUNK;
            let users: Vec<UserId> = chunk
                .iter()
                .map(|u| {
                    UserId::parse(u).map_err(|e| ApiError::from(crate::store::StoreError::Malformed(e.to_string())))
                })
                .collect::<Result<_, _>>()?;
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
            let heads: std::collections::HashMap<&OrderId, &MessageHead> =
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
        }
        Ok(())
    }
}
