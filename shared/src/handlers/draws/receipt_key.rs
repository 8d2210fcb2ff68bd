//! `GET /events/{id}/receipt-key` (grab): the public keys that sign entries' receipts (current, and
//! next and previous around a rotation), the keys the event committed to at release
//! (`committed`), and once the draw is complete its head, signed with a committed key when the
//! draw completed and kept (docs/FAIRNESS.md sections 6a and 6b). With them an entrant checks their receipt, and
//! that the draw shown to them is the one shown to everyone. Grab serves it: grab holds the key.

use lambda_http::{Body, Response, http::StatusCode};

use crate::{
    domain::{
        Event, EventId,
        entry_receipt::{DrawHead, ReceiptKey, ReceiptKeyRing, committed_signer},
        event::rfc3339,
        key_rotation::Staged,
    },
    http::{ApiError, json},
    recovery::Rebuilder,
    secrets::StagedSecret,
    store::Store,
};

/// `GET /events/{id}/receipt-key` (grab).
#[derive(Clone)]
pub struct ReceiptKeys {
    store: Store,
    rebuilder: Rebuilder,
    receipts: StagedSecret<ReceiptKey>,
}

impl ReceiptKeys {
    pub fn new(store: Store, rebuilder: Rebuilder, receipts: StagedSecret<ReceiptKey>) -> Self {
        Self { store, rebuilder, receipts }
    }

    /// The keys as published, and once the draw is complete its head: the one signed and kept
    /// when it completed (an event drawn before heads were kept: signed now, with a key it
    /// committed to while one is held, else none).
    pub async fn published(&self, event: &EventId) -> Result<(Response<Body>, &'static str), ApiError> {
        let known = self.rebuilder.event(event).await?.ok_or(ApiError::EventNotFound)?;
        let keys = self.receipts.get().await?;
        let ring = ReceiptKeyRing::of(&keys);
        let kept = self.store.ballot_state(&known.id).await?.draw.and_then(|d| d.head);
        let head = match kept {
            Some(head) => Some(head),
            None => match draw_head(&self.store, &known).await? {
                Some(head) => match signer_for(&keys, &known) {
                    Ok(signer) => Some(signer.sign_head(&vouching(&known, &keys, head))),
                    // Logged by `signer_for`: the keys are served without a head.
                    Err(_) => None,
                },
                None => None,
            },
        };
        let mut published = ring.published(event, head);
        if let Some(terms) = known.draw.as_ref().filter(|d| !d.receipt_keys.is_empty()) {
            published["committed"] = serde_json::to_value(&terms.receipt_keys).expect("strings always serialize");
        }
        Ok((json(StatusCode::OK, &published), "OK"))
    }
}

/// The head with the keys it vouches for: exactly the ones its event committed to at release
/// (an event released before keys were committed: the keys held now).
pub fn vouching(event: &Event, keys: &Staged<ReceiptKey>, head: DrawHead) -> DrawHead {
    let committed = event.draw.as_ref().map(|d| d.receipt_keys.as_slice()).unwrap_or_default();
    let receipt_keys = if committed.is_empty() {
        ReceiptKeyRing::of(keys).ids()
    } else {
        committed.iter().map(|k| k.key_id.clone()).collect()
    };
    DrawHead { receipt_keys, ..head }
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

/// The key an event's receipts are signed with now: one the event committed to at release
/// (docs/FAIRNESS.md section 6a), or for an event released before keys were committed the current
/// one. When every committed key has rotated out (two rotations since its release) nothing more
/// can be signed for it, and no entry is taken: `503`, and the log says why.
pub(crate) fn signer_for(keys: &Staged<ReceiptKey>, event: &Event) -> Result<ReceiptKey, ApiError> {
    let committed = event.draw.as_ref().map(|d| d.receipt_keys.as_slice()).unwrap_or_default();
    if committed.is_empty() {
        return Ok(keys.current.clone());
    }
    committed_signer(keys, committed).cloned().ok_or_else(|| {
        tracing::error!(
            event_id = %event.id,
            "no receipt key the event committed to at release is held any more (the hash secret rotated twice since): its entries and its draw's head cannot be signed"
        );
        ApiError::Busy
    })
}
