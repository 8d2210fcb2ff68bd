//! What `ticketgrab-verify` finds in what an event publishes (docs/FAIRNESS.md), from the
//! documents themselves, read already: a red-packet event, a draw (one whole document or its
//! pages) and an entry's receipt with the keys and the draw. The binary reads the files; the
//! document vectors (`tests/vectors/fairness-documents.json`, [`crate::document_vectors`]) hand
//! the same checks their inputs in memory, so both run one code.

use serde::Deserialize;
use serde_json::Value;
use shared::domain::{
    draw::{Algorithm, EntryKey, Published},
    entry_receipt::{DrawHead, ReceiptKeyRing},
    red_packet::{self, AmountSeed},
};
use time::{OffsetDateTime, format_description::well_known::Rfc3339};

/// What a check found, with its exit code (docs/FAIRNESS.md section 7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Holds(String),
    Fails(String),
    Unreadable(String),
    Excluded(String),
}

use Verdict::{Excluded, Fails, Holds, Unreadable};

impl Verdict {
    /// 0 it checks out, 1 it does not, 2 an input is unreadable, 3 an exclusion proven.
    pub fn exit_code(&self) -> u8 {
        match self {
            Holds(_) => 0,
            Fails(_) => 1,
            Unreadable(_) => 2,
            Excluded(_) => 3,
        }
    }

    /// What was found, in a line.
    pub fn said(&self) -> &str {
        match self {
            Holds(s) | Fails(s) | Unreadable(s) | Excluded(s) => s,
        }
    }
}

#[derive(Deserialize)]
pub struct PublicPacket {
    total: u64,
    currency: String,
    commitment: String,
    algorithm: String,
}

#[derive(Deserialize)]
pub struct PublicEvent {
    id: String,
    capacity: u32,
    red_packet: PublicPacket,
    red_packet_seed: Option<String>,
}

/// What `loadgen --receipt-out` writes, and what an entrant keeps: their receipt, the event's
/// receipt keys as published, and their entry key if they show it.
#[derive(Deserialize)]
pub struct Shown {
    receipt: String,
    keys: serde_json::Value,
    #[serde(default)]
    entry_key: Option<String>,
}

/// The draw in `pages`, whole: one whole document as it is (no `from`: `verify` checks it), or
/// pages joined. `Err` is the verdict when it cannot be had (unreadable, or pages that do not make
/// one draw).
fn read_draw(pages: Vec<Value>) -> Result<(Published, serde_json::Map<String, Value>), Verdict> {
    // Each page an object whose members are of their kinds (docs/FAIRNESS.md section 8), a `null`
    // member as if absent; read before anything is compared, so an unreadable page is exit 2.
    let pages: Vec<serde_json::Map<String, Value>> = pages
        .into_iter()
        .enumerate()
        .map(|(i, p)| match p {
            Value::Object(mut members) => {
                members.retain(|_, value| !value.is_null());
                Ok(members)
            }
            _ => Err(Unreadable(format!("page {} is not a JSON object", i + 1))),
        })
        .collect::<Result<_, _>>()?;
    let mut read = pages
        .iter()
        .enumerate()
        .map(|(i, p)| {
            serde_json::from_value::<Published>(Value::Object(p.clone())).map_err(|e| format!("page {}: {e}", i + 1))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(Unreadable)?;
    // Integers the server never writes as 0 (docs/FAIRNESS.md section 8, "Kinds").
    if read.iter().any(|p| p.capacity == Some(0) || p.admission_rate == Some(0) || p.next == Some(0)) {
        return Err(Unreadable("a page's capacity, admission_rate or next is 0".into()));
    }
    // Every page carries the same terms: each member but `from`, `next` and `order`, named by the
    // text or not.
    let terms = |page: &serde_json::Map<String, Value>| {
        let mut terms = page.clone();
        terms.retain(|name, _| !matches!(name.as_str(), "from" | "next" | "order"));
        terms
    };
    let Some(first) = pages.first().map(terms) else { return Err(Unreadable("no page".into())) };
    if pages.iter().any(|p| terms(p) != first) {
        return Err(Fails("the pages do not make one draw: a page has other terms than the first".into()));
    }
    if read.len() == 1 && read[0].from.is_none() && read[0].next.is_none() {
        return Ok((read.remove(0), first));
    }
    Published::join(read).map(|whole| (whole, first)).map_err(|e| Fails(e.to_string()))
}

/// What a draw that checks out is, in a line.
fn describe(draw: &Published, files: usize) -> String {
    let entrants = draw.sorted_entrants().map_or(0, |e| e.len());
    format!(
        "{}{}{}: the secret matches the commitment, {entrants} entrants hash to the root, and the order of {} places is \
         theirs",
        draw.algorithm,
        draw.event_id.as_deref().map(|e| format!(" of event {e}")).unwrap_or_default(),
        if files > 1 { format!(" ({files} pages joined)") } else { String::new() },
        draw.order.len()
    )
}

/// A published draw: one whole document, or its pages.
pub fn draw(pages: Vec<Value>) -> Verdict {
    let files = pages.len();
    let draw = match read_draw(pages) {
        Ok((d, _)) => d,
        Err(v) => return v,
    };
    match draw.verify() {
        Ok(()) => Holds(describe(&draw, files)),
        Err(fault) => Fails(fault.to_string()),
    }
}

fn time(t: &str) -> Option<OffsetDateTime> {
    shared::domain::instant::instant(t)
}

/// When a fair open admits place `place` (from 1): `floor((place - 1) / rate)` seconds after the
/// draw (docs/FAIRNESS.md section 7).
fn admission(draw: &Published, rate: u32, place: u64) -> String {
    let after = (place.max(1) - 1) / u64::from(rate.max(1));
    let at = draw
        .drawn_at
        .as_deref()
        .and_then(time)
        .and_then(|d| d.checked_add(time::Duration::seconds(i64::try_from(after).ok()?)))
        .and_then(|at| at.format(&Rfc3339).ok());
    match at {
        Some(at) => format!("admitted {after} s after the draw, at {at}"),
        None => format!("admitted {after} s after the draw"),
    }
}

/// The keys document's members of their kinds (docs/FAIRNESS.md section 6a, "Public keys"): an
/// object; `key_id`, `public_key`, `event_id` and `draw_head` strings, `next` and `previous`
/// objects (with `key_id` and `public_key` strings), `committed` a list; `null` as if absent; the
/// current `public_key` required.
fn keys_kinds(keys: &Value) -> Result<(), String> {
    let Some(doc) = keys.as_object() else { return Err("not a JSON object".into()) };
    let present = |doc: &serde_json::Map<String, Value>, name: &str| doc.get(name).filter(|v| !v.is_null()).cloned();
    let strings = |doc: &serde_json::Map<String, Value>, names: &[&str]| {
        names.iter().try_for_each(|name| match present(doc, name) {
            Some(v) if !v.is_string() => Err(format!("{name} is not a string")),
            _ => Ok(()),
        })
    };
    strings(doc, &["key_id", "public_key", "event_id", "draw_head"])?;
    if present(doc, "public_key").is_none() {
        return Err("no public_key".into());
    }
    for around in ["next", "previous"] {
        match present(doc, around) {
            None => {}
            Some(Value::Object(key)) => strings(&key, &["key_id", "public_key"])?,
            Some(_) => return Err(format!("{around} is not an object")),
        }
    }
    match present(doc, "committed") {
        Some(v) if !v.is_array() => Err("committed is not a list".into()),
        _ => Ok(()),
    }
}

/// An entry's receipt (`{"receipt", "keys", "entry_key"?}`) against its event's published draw.
pub fn receipt(shown: Value, pages: Vec<Value>) -> Verdict {
    let shown: Shown = match serde_json::from_value(shown) {
        Ok(s) => s,
        Err(e) => return Unreadable(format!("the receipt file: {e}")),
    };
    // Unreadable input is found first (docs/FAIRNESS.md section 7, a receipt's verdict, step 1).
    if let Err(why) = keys_kinds(&shown.keys) {
        return Unreadable(format!("the keys document: {why}"));
    }
    let entry_key = match shown.entry_key.as_deref().map(EntryKey::from_hex) {
        Some(None) => return Unreadable("the entry key is not 64 lowercase hex digits".into()),
        Some(Some(key)) => Some(key),
        None => None,
    };
    let (draw, terms) = match read_draw(pages) {
        Ok(d) => d,
        Err(v) => return v,
    };
    // The keys document the operator serves names the same commitment as the draw's terms (`[]`
    // when they commit none), or the inputs contradict each other; compared as JSON.
    if let Some(named) = shown.keys.get("committed").filter(|v| !v.is_null())
        && *named != terms.get("receipt_keys").cloned().unwrap_or(Value::Array(Vec::new()))
    {
        return Fails("the keys document's committed keys are not the draw's receipt_keys".into());
    }
    // The keys the event committed to at release, in the draw's terms (docs/FAIRNESS.md section
    // 6a): the receipt and the head check against these alone. A draw whose event committed none
    // (released before they were) is checked against the keys document.
    let committed = !draw.receipt_keys.is_empty();
    let ring = if committed {
        match ReceiptKeyRing::of_committed(&draw.receipt_keys) {
            Some(r) => r,
            None => {
                return Fails(
                    "the draw's committed receipt keys are malformed: one or two keys of the curve, each under its own id"
                        .into(),
                );
            }
        }
    } else {
        match ReceiptKeyRing::from_published(&shown.keys) {
            Ok(r) => r,
            Err(e) => return Fails(format!("the keys do not check: {e}")),
        }
    };
    let said = match ring.verify(&shown.receipt) {
        Ok(r) => r,
        Err(e) if committed => {
            return Fails(format!("the receipt does not check against the keys its event committed to: {e}"));
        }
        Err(e) => return Fails(format!("the receipt does not check against the keys: {e}")),
    };
    if let Some(event) = shown.keys["event_id"].as_str()
        && event != said.event.as_str()
    {
        return Fails(format!("the keys are published for event {event}; the receipt names {}", said.event));
    }
    let mut held =
        format!("the receipt checks (key {}, event {}, accepted at {})", said.key_id, said.event, said.entered_at);
    if let Some(key) = &entry_key {
        let leaf = key.leaf(&said.event);
        if leaf != said.leaf {
            return Fails(format!("the entry key's leaf in {} is {leaf}, not the receipt's {}", said.event, said.leaf));
        }
        held.push_str(", the entry key hashes to its leaf");
    }
    if draw.algorithm() != Ok(Algorithm::V2) {
        return Fails(format!("the draw is {}: a receipt names a leaf of a ticket-draw/v2 draw", draw.algorithm));
    }
    let whose = match draw.event_id.as_deref() {
        Some(drawn) if drawn != said.event.as_str() => {
            return Fails(format!("the draw is event {drawn}'s; the receipt names {}", said.event));
        }
        Some(drawn) => format!("the draw of event {drawn}"),
        None => format!(
            "the draw (it names no event: it must be {}'s, as GET /events/{}/draw publishes it)",
            said.event, said.event
        ),
    };
    // The order the operator published, its beacon's signature aside (docs/FAIRNESS.md section
    // 7): whether the round was the chain's is the draw's verdict, not the receipt's.
    let verified = draw.verify_order();
    let n = draw.order.len() as u64;
    // The draw's signed head: the draw shown is the one the operator signed for everyone.
    let head: Result<DrawHead, String> = match shown.keys["draw_head"].as_str() {
        None => {
            Err("the keys carry no signed draw head (GET /events/{id}/receipt-key gives it once the draw is complete)"
                .into())
        }
        Some(text) => match ring.verify_head(text) {
            Err(e) if committed => {
                Err(format!("the draw head does not check against the keys its event committed to: {e}"))
            }
            Err(e) => Err(format!("the draw head does not check against the keys: {e}")),
            Ok(h) if h.event != said.event => Err(format!("the draw head is event {}'s", h.event)),
            // Signed by a key the event committed to, for this very draw, yet vouching for other
            // keys: the operator's own signature contradicts its release terms. The draw is still
            // the one it signed.
            Ok(h) if committed && h.matches_order(&draw) => Ok(h),
            Ok(h) if !h.matches(&draw) => Err("the draw is not the one its signed head names".into()),
            Ok(h) => Ok(h),
        },
    };
    // A rank makes a late place only on a fair open, dated at or after the close, by the signed
    // head's terms (never an unsigned page's); otherwise the receipt is an entry the draw must hold.
    let late = said.late.filter(|_| {
        head.as_ref().is_ok_and(|h| {
            let close = time(&h.entries_close);
            h.admission_rate.is_some() && matches!((close, time(&said.entered_at)), (Some(c), Some(t)) if t >= c)
        })
    });
    match (draw.order.iter().position(|l| *l == said.leaf), late) {
        (Some(at), late) => {
            if let Err(fault) = verified {
                return Fails(format!("{held}; but the draw does not check out: {fault}"));
            }
            if let Some(rank) = late {
                return Fails(format!(
                    "{held}; the receipt is a late place's (rank {rank}, behind the draw), yet its leaf is drawn at place {}",
                    at + 1
                ));
            }
            let place = at as u64 + 1;
            let outcome = match (draw.admission_rate, draw.capacity) {
                (Some(rate), _) => format!("; a fair open: {}", admission(&draw, rate, place)),
                (None, Some(capacity)) if place <= u64::from(capacity) => {
                    format!("; a ballot of {capacity} places: it won")
                }
                (None, Some(capacity)) => format!("; a ballot of {capacity} places: it did not win"),
                (None, None) => String::new(),
            };
            let signed = if head.is_ok() { ", the draw its signed head names" } else { "" };
            Holds(format!(
                "{held}; {whose}{signed} checks out ({}); leaf {} holds place {place} of {n}{outcome}",
                draw.algorithm, said.leaf
            ))
        }
        (None, Some(rank)) => {
            if let Err(fault) = verified {
                return Fails(format!("{held}; but the draw does not check out: {fault}"));
            }
            // A rank of up to 2^64 - 1 behind n places: counted wide, never wrapped.
            let place = u128::from(n) + u128::from(rank.get());
            let admitted = draw
                .admission_rate
                .and_then(|r| u64::try_from(place).ok().map(|p| format!(", {}", admission(&draw, r, p))))
                .unwrap_or_default();
            Holds(format!(
                "{held}; a fair open's late place (rank {rank}, accepted after the entries closed): not among the {n} \
                 drawn, as it should not be; its place is {place}{admitted}"
            ))
        }
        (None, None) => {
            // A missing leaf proves something only in a draw that recomputes and is the one the
            // operator signed: anyone with the revealed secret can make a draw without it.
            if let Err(fault) = verified {
                return Fails(format!(
                    "{held}; its leaf is not in the draw, but the draw does not check out ({fault}): that proves nothing"
                ));
            }
            let head = match head {
                Ok(head) => head,
                Err(why) => {
                    return Fails(format!("{held}; its leaf is not in the draw, but {why}: that proves nothing"));
                }
            };
            if committed {
                // The receipt's key is one the event committed to at release: the head cannot
                // disown it. A head that vouches for other keys says so against itself.
                let disowned = if head.matches(&draw) {
                    String::new()
                } else {
                    format!(
                        " (its signed head vouches for {} against the {} the event committed to at release: the \
                         operator's own signature contradicts its terms)",
                        head.receipt_keys.join(", "),
                        draw.receipt_keys.iter().map(|k| k.key_id.as_str()).collect::<Vec<_>>().join(", ")
                    )
                };
                return Excluded(format!(
                    "EXCLUSION PROVEN: {held} with a key its event committed to at release, and its leaf {} is not \
                     among the {n} entrants of {whose}, which checks out and is the draw its signed head names{disowned}: \
                     the operator left out an entry it accepted",
                    said.leaf
                ));
            }
            if !head.vouches_for(&said.key_id) {
                return Fails(format!(
                    "{held}; its leaf is not in the draw, but its key {} is not one the signed head vouches for \
                     ({}): that proves nothing",
                    said.key_id,
                    head.receipt_keys.join(", ")
                ));
            }
            Excluded(format!(
                "EXCLUSION PROVEN: {held}, and its leaf {} is not among the {n} entrants of {whose}, which checks out \
                 and is the draw its signed head names: the operator left out an entry it accepted",
                said.leaf
            ))
        }
    }
}

/// A red-packet event after its sale (and ticket N's amount).
pub fn red_packet(event: &PublicEvent, ticket: Option<u32>, amount: Option<u64>) -> Result<String, String> {
    let packet = &event.red_packet;
    if packet.algorithm != red_packet::ALGORITHM {
        return Err(format!("the algorithm is {}, not {}", packet.algorithm, red_packet::ALGORITHM));
    }
    let seed = event.red_packet_seed.as_deref().ok_or("the seed is not published yet (the sale has not ended)")?;
    let seed = AmountSeed::from_hex(seed).map_err(|e| e.to_string())?;
    if seed.commitment() != packet.commitment {
        return Err("the seed does not hash to the commitment published at release".into());
    }
    if event.capacity == 0 || u64::from(event.capacity) > packet.total {
        return Err(format!("{} packets cannot split {}", event.capacity, packet.total));
    }
    let split = red_packet::split(&seed, packet.total, event.capacity);
    let sum: u64 = split.iter().sum();
    let smallest = split.iter().min().copied().unwrap_or(0);
    if sum != packet.total || smallest < 1 {
        return Err(format!("the split sums to {sum} of {} (smallest {smallest})", packet.total));
    }
    let mut said = format!(
        "{}: the seed matches the commitment; {} amounts sum to {} {} exactly, the smallest {smallest}, the largest {}",
        event.id,
        split.len(),
        packet.total,
        packet.currency,
        split.iter().max().unwrap_or(&0)
    );
    if let (Some(ticket), Some(amount)) = (ticket, amount) {
        let wanted = split.get((ticket as usize).wrapping_sub(1)).ok_or(format!("no ticket number {ticket}"))?;
        if *wanted != amount {
            return Err(format!("ticket {ticket}'s amount is {wanted}, not {amount}"));
        }
        said.push_str(&format!("; ticket {ticket} holds {amount}"));
    }
    Ok(said)
}
