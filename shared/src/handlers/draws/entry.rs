//! `POST /events/{id}/entry` (grab) and `GET /events/{id}/entry` (query): a user enters a ballot,
//! once, until the draw closes the registration, and sees their entry: its key, leaf and signed
//! receipt (theirs alone), and after the draw their place and the proof that the published draw
//! holds it. A fair open's queue takes its places the same way ([`super::queue`]): the work an
//! entry costs ([`Work`]), a new entry's key and receipt, and what of it is shown.

use lambda_http::{Body, Request, Response, http::StatusCode};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::{drawing_event, event_in, published_draw::DrawView, receipt_key::signer_for};
use crate::{
    domain::{
        Event, EventId, UserId,
        draw::{Algorithm, EntryKey, ProofStep},
        entry_receipt::ReceiptKey,
        event::rfc3339,
        proof_of_work,
        sale_mode::{Entrant, SaleMode},
    },
    http::{ApiError, Caller, json, reply::json_body},
    recovery::Rebuilder,
    secrets::StagedSecret,
    store::{
        Store,
        draws::{Registered, StoredEntry},
    },
};

/// An entry's body: none, or the work the event asks for (`domain::proof_of_work`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Work {
    #[serde(default)]
    proof_of_work: Option<String>,
}

impl Work {
    /// The request's body: empty, or `{"proof_of_work": "<nonce>"}`.
    pub fn of(req: &Request) -> Result<Self, ApiError> {
        if req.body().is_empty() {
            return Ok(Self::default());
        }
        json_body(req)
    }

    /// Whether the work is what `event` asks of `user` (nothing, when it asks none).
    pub(super) fn check(&self, event: &Event, user: &crate::domain::UserId) -> Result<(), ApiError> {
        let Some(bits) = event.draw.as_ref().and_then(|d| d.proof_of_work_bits) else { return Ok(()) };
        match &self.proof_of_work {
            Some(nonce) if proof_of_work::verify(&event.id, user, bits, nonce) => Ok(()),
            _ => Err(ApiError::BadProofOfWork { bits }),
        }
    }
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
    pub(super) fn of(event: &EventId, entry: &StoredEntry) -> Self {
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
pub(super) async fn new_entry(
    receipts: &StagedSecret<ReceiptKey>,
    event: &Event,
    user: &UserId,
    email: &crate::domain::Email,
    now: OffsetDateTime,
) -> Result<(Entrant, Option<ReceiptKey>), ApiError> {
    let mut entrant = Entrant { user: user.clone(), email: email.clone(), late: None, key: None, receipt: None };
    if event.draw.as_ref().map(|d| d.algorithm) != Some(Algorithm::V2) {
        return Ok((entrant, None));
    }
    let signer = signer_for(&*receipts.get().await?, event)?;
    let key = EntryKey::generate();
    entrant.receipt = Some(signer.issue(&event.id, &key.leaf(&event.id), &rfc3339(now), None));
    entrant.key = Some(key);
    Ok((entrant, Some(signer)))
}

impl Entries {
    pub fn new(store: Store, rebuilder: Rebuilder, receipts: StagedSecret<ReceiptKey>) -> Self {
        Self { store, rebuilder, receipts }
    }

    /// `POST /events/{id}/entry`, its body empty or the work the event asks for: `201 ENTERED` the
    /// first time, `200 ALREADY_ENTERED` with the same entry after.
    pub async fn enter(
        &self,
        req: &Request,
        id: &EventId,
        caller: &Caller,
    ) -> Result<(Response<Body>, &'static str), ApiError> {
        let work = Work::of(req)?;
        let (entry, new) = self.register(id, caller, &work).await?;
        let (status, code) = if new { (StatusCode::CREATED, "ENTERED") } else { (StatusCode::OK, "ALREADY_ENTERED") };
        Ok((json(status, &entry), code))
    }

    /// Enters the caller: new the first time, the same entry after.
    async fn register(&self, id: &EventId, caller: &Caller, work: &Work) -> Result<(EntryView, bool), ApiError> {
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

impl DrawView {
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
