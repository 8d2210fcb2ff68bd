//! The draw's roll: each entrant as the draw takes them (its leaf and its user), read from the
//! event's entries, and the draw made from it. The organiser's draw ([`super::draw`]) makes it
//! first and records its root; the published draw ([`super::published_draw`]) makes it again from
//! the stored roll, with this same code, so the two cannot differ.

use crate::{
    domain::{
        Event, UserId,
        draw::{self, Algorithm, Published},
        event::rfc3339,
        hex,
        sale_mode::{EntryShards, Revealed},
    },
    http::ApiError,
    store::{Store, draws::RollEntry},
};

/// Shards of the entries read into the roll at once: one wave, then its shards counted as read.
pub(super) const ROLL_WAVE: usize = 16;

/// The draw of the roll's entrants with the revealed secret and round, as `event` publishes its
/// terms: the entrants in entrant order (v1: by user id; v2: by leaf), the compact draw, and their
/// users in that order.
pub(super) fn draw_of(
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
        receipt_keys: terms.receipt_keys.clone(),
    };
    Ok((published, compact, users))
}

/// One shard of the event's entries as the draw takes them: each entrant as its leaf (v1: of the
/// user id; v2: of the entry's key) and its user.
pub(super) async fn roll_of_shard(
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
pub(super) fn placed(compact: &draw::Compact, users: &[UserId], n: usize) -> Vec<UserId> {
    (0..n.min(compact.len())).filter_map(|p| compact.at(p)).map(|i| users[i].clone()).collect()
}
