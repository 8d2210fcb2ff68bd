//! `POST /events/{id}/queue` and `GET /events/{id}/queue` (grab): a fair open's pre-queue. A user
//! joins it before the open and sees their place; the draw shuffles the places taken before the
//! entries close (later ones queue behind, in arrival order), and each place is admitted at its
//! time with a short-lived token that verify-hash requires, so nobody is ahead by being fastest.

use lambda_http::{Body, Request, Response, http::StatusCode};
use serde::Serialize;
use time::OffsetDateTime;

use super::{
    entry::{EntryShown, Work, new_entry},
    event_in,
    published_draw::DrawView,
};
use crate::{
    domain::{
        Event, EventId,
        entry_receipt::ReceiptKey,
        event::{epoch_ms, rfc3339},
        sale_mode::{self, Entrant, SaleMode},
        verify_hash::HashKey,
    },
    http::{ApiError, Caller, json},
    recovery::Rebuilder,
    secrets::StagedSecret,
    store::{Store, draws::Registered},
};

/// How long an admission token lasts: long enough to ask verify-hash, short enough that a token
/// passed on is soon worthless (a user asks for another whenever they like).
pub const ADMISSION_TTL: std::time::Duration = std::time::Duration::from_secs(120);

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

    /// `POST /events/{id}/queue`, its body empty or the work the event asks for: `201 QUEUED` the
    /// first time, `200 ALREADY_QUEUED` with the same place after.
    pub async fn join(
        &self,
        req: &Request,
        id: &EventId,
        caller: &Caller,
    ) -> Result<(Response<Body>, &'static str), ApiError> {
        let work = Work::of(req)?;
        let (place, new) = self.register(id, caller, &work).await?;
        let (status, code) = if new { (StatusCode::CREATED, "QUEUED") } else { (StatusCode::OK, "ALREADY_QUEUED") };
        Ok((json(status, &place), code))
    }

    /// Joins the caller: new the first time, the same place after. Before the draw the place is
    /// among those it shuffles; after it, behind them in arrival order.
    async fn register(&self, id: &EventId, caller: &Caller, work: &Work) -> Result<(QueueView, bool), ApiError> {
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
                    (Some(s), Some(leaf)) => Some(s.issue(id, leaf, &at, Some(rank))),
                    _ => None,
                };
                let joined = self.store.join_late(id, event.entry_shards(), &late, now, sign).await?;
                matches!(joined, Registered::Late(_) | Registered::Entered)
            }
        };
        Ok((self.place_in(&event, caller, now).await?, new))
    }

    /// `GET /events/{id}/queue`: the caller's place, and once it is admitted a fresh admission
    /// token.
    pub async fn place(&self, id: &EventId, caller: &Caller) -> Result<(Response<Body>, &'static str), ApiError> {
        let event = event_in(&self.rebuilder, id, SaleMode::FairOpen).await?;
        Ok((json(StatusCode::OK, &self.place_in(&event, caller, OffsetDateTime::now_utc()).await?), "OK"))
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
