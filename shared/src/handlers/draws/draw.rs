//! `POST /admin/events/{id}/draw` (release): the organiser draws a ballot or a fair open, revealing
//! the secret they committed to at release; anyone can then recompute the draw
//! ([`super::published_draw`]).
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
    time::{Duration, Instant},
};

use futures::{StreamExt, stream};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::{
    drawing_event,
    roll::{ROLL_WAVE, draw_of, placed, roll_of_shard},
};
use crate::{
    delivery::{Courier, Delivery},
    domain::{
        Event, EventId, OrderId, UserId, Waiter,
        draw::Algorithm,
        entry_receipt::ReceiptKey,
        event::rfc3339,
        order::{MessageHead, WaitHead},
        sale_mode::SaleMode,
    },
    gate::{DrawLaid, DrawWaiter, DrawWinner, Gate},
    http::ApiError,
    recovery::{Rebuild, Rebuilder},
    secrets::StagedSecret,
    store::{Store, draws::DrawRecord},
};

/// Entrants one `draw.lua` call lays down: a few hundred keeps each script well under a
/// millisecond of the event's slot.
const DRAW_CHUNK: usize = 500;
/// Waiting places written to DynamoDB at once.
const PLACE_WRITES: usize = 16;
/// One ask of a draw starts reading the entries for this long, and draws from the roll only if it
/// is complete by then (release's timeout is 15 s: a wave, the roll's read and the draw of a
/// million entrants each take seconds on the emulator)...
const ROLL_FOR: Duration = Duration::from_secs(6);
/// ... and lays down chunks until this long after it began. Whatever it has not begun, the next
/// ask does.
const LAY_FOR: Duration = Duration::from_secs(10);

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
pub(super) fn laid_down(event: &Event, entrants: usize) -> usize {
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

/// An ask's failure, with the step it failed in and the shards read so far (its reply, a `503`,
/// says nothing of either).
fn failed_in(step: &'static str, event: &EventId, shards_read: usize) -> impl FnOnce(ApiError) -> ApiError {
    move |e| {
        tracing::warn!(event_id = %event, step, shards_read, error = %e, "an ask of a draw failed; the next goes on");
        e
    }
}

/// `POST /admin/events/{id}/draw` (release).
#[derive(Clone)]
pub struct Draw {
    store: Store,
    gate: Gate,
    rebuilder: Rebuilder,
    courier: Courier,
    /// The entry receipts' keys: the complete draw's head is signed once, with one its event
    /// committed to, and kept (docs/FAIRNESS.md section 6b).
    receipts: StagedSecret<ReceiptKey>,
    /// How long one ask reads the entries, and lays places down ([`ROLL_FOR`], [`LAY_FOR`]).
    roll_for: Duration,
    lay_for: Duration,
}

impl Draw {
    pub fn new(
        store: Store,
        gate: Gate,
        rebuilder: Rebuilder,
        courier: Courier,
        receipts: StagedSecret<ReceiptKey>,
    ) -> Self {
        Self { store, gate, rebuilder, courier, receipts, roll_for: ROLL_FOR, lay_for: LAY_FOR }
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
            // A draw completed before its head was kept (a crash between the two) keeps it now.
            if record.head.is_none() {
                self.keep_head(&event).await;
            }
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
                    head: None,
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
        self.keep_head(&event).await;
        tracing::info!(event_id = %id, entrants = record.entrants, mode = event.sale_mode.as_str(), "drawn");
        Ok(DrawStep::Done(summary(&event, &record)))
    }

    /// Signs the complete draw's head once, with a key its event committed to, and keeps it: what
    /// `GET /events/{id}/receipt-key` serves from then on, whatever rotations follow. Best effort:
    /// a head not kept now is kept by the next ask of the draw, and until then signed where it is
    /// asked for while a committed key is held.
    async fn keep_head(&self, event: &Event) {
        let signed = async {
            let Some(head) = super::receipt_key::draw_head(&self.store, event).await? else { return Ok(None) };
            let keys = self.receipts.get().await?;
            let signer = super::receipt_key::signer_for(&keys, event)?;
            Ok::<_, ApiError>(Some(signer.sign_head(&super::receipt_key::vouching(event, &keys, head))))
        };
        match signed.await {
            Ok(Some(text)) => {
                if let Err(e) = self.store.keep_head(&event.id, &text).await {
                    tracing::warn!(event_id = %event.id, error = %e, "the draw's head was not kept; the next ask keeps it");
                }
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(event_id = %event.id, error = %e, "the draw's head could not be signed"),
        }
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
