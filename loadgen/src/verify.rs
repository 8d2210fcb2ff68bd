//! `ticketgrab-verify`: checks what an event publishes, as an auditor would, trusting nothing but
//! the published data and the algorithms' descriptions (docs/FAIRNESS.md; the code in
//! shared/domain/src/red_packet.rs, draw.rs and entry_receipt.rs).
//!
//!   ticketgrab-verify red-packet <event.json> [--ticket N --amount V]
//!       the event as `GET /events/{id}` shows it after the sale: its seed hashes to the
//!       commitment published at release, and the split is exact (and ticket N's amount is V)
//!   ticketgrab-verify draw <published.json>...
//!       a draw as published, `ticket-draw/v1` or `ticket-draw/v2`: one whole document, or the
//!       pages of `GET /events/{id}/draw?from=` (in any order; joined by their `from`, each with
//!       the same terms, every place once): the secret hashes to the commitment, the entrants to
//!       the root, and the order is the one they derive
//!   ticketgrab-verify receipt <receipt.json> --draw <published.json>...
//!       an entry's signed receipt (`ticket-entry-receipt/v1`) against the event's draw: the file
//!       holds `receipt` (the `TR1.` text), `keys` (`GET /events/{id}/receipt-key` as it answered)
//!       and optionally `entry_key` (the entrant's key, hex). The receipt, and the draw's head,
//!       check against the keys its event committed to at release (the draw's `receipt_keys`;
//!       a draw whose event committed none, against the keys document); a head that vouches for
//!       other keys contradicts the operator's own terms and disowns nothing;
//!       the entry key, when given, hashes to the receipt's leaf; the draw checks out; and the
//!       leaf's place in it is printed (a ballot's: whether it won; a fair open's: when it is
//!       admitted). A receipt that checks and whose leaf is not in a draw that checks out and is
//!       the one its signed head names (`keys.draw_head`, docs/FAIRNESS.md section 6b) proves the
//!       operator left out an entry it accepted (exit 3); without such a head, or against a draw
//!       that does not check out, a missing leaf proves nothing (exit 1). A fair open's late place
//!       (its receipt names a rank, dated after the close) is behind the draw, not in it
//!   ticketgrab-verify vectors <fairness-v1.json | fairness-v2.json>
//!       docs/FAIRNESS.md's test vectors (tests/vectors/), picked by their `version`: every one
//!       recomputed
//!
//! Exit codes:
//!   0  it checks out (what was checked is printed)
//!   1  it does not (the first reason printed)
//!   2  an input is unreadable (not a file, not JSON, not the document named)
//!   3  an exclusion proven: a receipt that checks names a leaf the signed draw left out

use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};
use serde::Deserialize;
use shared::domain::{
    draw::{Algorithm, EntryKey, Published},
    entry_receipt::{DrawHead, ReceiptKeyRing},
    fairness_vectors, fairness_vectors_v2,
    red_packet::{self, AmountSeed},
};
use time::{OffsetDateTime, format_description::well_known::Rfc3339};

#[derive(Parser)]
#[command(
    version,
    about = "Checks an event's published red-packet split, draw or an entry's receipt, or docs/FAIRNESS.md's vectors",
    after_help = "Exit: 0 checks out, 1 does not (the reason printed), 2 unreadable input, 3 an exclusion proven (a receipt whose leaf the draw left out)"
)]
struct Cli {
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand)]
enum What {
    /// A red-packet event after its sale (GET /events/{id}).
    RedPacket {
        event: PathBuf,
        /// A ticket number whose amount to check...
        #[arg(long, requires = "amount")]
        ticket: Option<u32>,
        /// ... against this amount, in the currency's smallest unit.
        #[arg(long, requires = "ticket")]
        amount: Option<u64>,
    },
    /// A published draw (ticket-draw/v1 or v2): one whole document or its pages.
    Draw {
        #[arg(required = true, num_args = 1..)]
        published: Vec<PathBuf>,
    },
    /// An entry's receipt ({"receipt", "keys", "entry_key"?}) against the event's published draw.
    Receipt {
        receipt: PathBuf,
        /// The event's published draw: one whole document or its pages.
        #[arg(long, required = true, num_args = 1..)]
        draw: Vec<PathBuf>,
    },
    /// docs/FAIRNESS.md's test vectors (fairness-v1.json or fairness-v2.json), each recomputed.
    Vectors { file: PathBuf },
}

/// What a check found: its exit code is the module doc's.
enum Verdict {
    Holds(String),
    Fails(String),
    Unreadable(String),
    Excluded(String),
}

use Verdict::{Excluded, Fails, Holds, Unreadable};

#[derive(Deserialize)]
struct PublicPacket {
    total: u64,
    currency: String,
    commitment: String,
    algorithm: String,
}

#[derive(Deserialize)]
struct PublicEvent {
    id: String,
    capacity: u32,
    red_packet: PublicPacket,
    red_packet_seed: Option<String>,
}

/// What `loadgen --receipt-out` writes, and what an entrant keeps: their receipt, the event's
/// receipt keys as published, and their entry key if they show it.
#[derive(Deserialize)]
struct Shown {
    receipt: String,
    keys: serde_json::Value,
    #[serde(default)]
    entry_key: Option<String>,
}

fn read<T: serde::de::DeserializeOwned>(path: &PathBuf) -> Result<T, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The draw in `paths`, whole: one whole document as it is (no `from`: `verify` checks it), or
/// pages joined. `Err` is the verdict when it cannot be had (unreadable, or pages that do not make
/// one draw).
fn read_draw(paths: &[PathBuf]) -> Result<Published, Verdict> {
    let mut pages = paths.iter().map(read::<Published>).collect::<Result<Vec<_>, _>>().map_err(Unreadable)?;
    if pages.len() == 1 && pages[0].from.is_none() && pages[0].next.is_none() {
        return Ok(pages.remove(0));
    }
    Published::join(pages).map_err(|e| Fails(e.to_string()))
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

fn draw(paths: &[PathBuf]) -> Verdict {
    let draw = match read_draw(paths) {
        Ok(d) => d,
        Err(v) => return v,
    };
    match draw.verify() {
        Ok(()) => Holds(describe(&draw, paths.len())),
        Err(fault) => Fails(fault.to_string()),
    }
}

fn time(t: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(t, &Rfc3339).ok()
}

/// When a fair open admits place `place` (from 1): `floor((place - 1) / rate)` seconds after the
/// draw (docs/FAIRNESS.md section 7).
fn admission(draw: &Published, rate: u32, place: u64) -> String {
    let after = (place.max(1) - 1) / u64::from(rate.max(1));
    let at = draw
        .drawn_at
        .as_deref()
        .and_then(time)
        .and_then(|d| (d + time::Duration::seconds(after as i64)).format(&Rfc3339).ok());
    match at {
        Some(at) => format!("admitted {after} s after the draw, at {at}"),
        None => format!("admitted {after} s after the draw"),
    }
}

fn receipt(file: &PathBuf, paths: &[PathBuf]) -> Verdict {
    let shown: Shown = match read(file) {
        Ok(s) => s,
        Err(e) => return Unreadable(e),
    };
    let draw = match read_draw(paths) {
        Ok(d) => d,
        Err(v) => return v,
    };
    // The keys the event committed to at release, in the draw's terms (docs/FAIRNESS.md section
    // 6a): the receipt and the head check against these alone. A draw whose event committed none
    // (released before they were) is checked against the keys document.
    let committed = !draw.receipt_keys.is_empty();
    let ring = if committed {
        // The keys document the operator serves names the same commitment, or the inputs
        // contradict each other.
        if let Some(named) = shown.keys.get("committed")
            && *named != serde_json::to_value(&draw.receipt_keys).unwrap_or_default()
        {
            return Fails("the keys document's committed keys are not the draw's receipt_keys".into());
        }
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
            Err(e) => return Unreadable(format!("{}: the keys: {e}", file.display())),
        }
    };
    let said = match ring.verify(shown.receipt.trim()) {
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
    if let Some(key) = &shown.entry_key {
        let Some(key) = EntryKey::from_hex(key.trim()) else {
            return Fails("the entry key is not 64 lowercase hex digits".into());
        };
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
    let verified = draw.verify();
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
            let place = n + rank.get();
            let admitted = draw.admission_rate.map(|r| format!(", {}", admission(&draw, r, place))).unwrap_or_default();
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

fn vectors(file: &PathBuf) -> Verdict {
    let doc: serde_json::Value = match read(file) {
        Ok(d) => d,
        Err(e) => return Unreadable(e),
    };
    let version = doc["version"].as_str().unwrap_or_default().to_owned();
    let checked = if version == fairness_vectors::VERSION {
        serde_json::from_value::<fairness_vectors::Vectors>(doc).map(|v| fairness_vectors::check(&v))
    } else if version == fairness_vectors_v2::VERSION {
        serde_json::from_value::<fairness_vectors_v2::Vectors>(doc).map(|v| fairness_vectors_v2::check(&v))
    } else {
        return Unreadable(format!(
            "{}: version {version:?}, neither {} nor {}",
            file.display(),
            fairness_vectors::VERSION,
            fairness_vectors_v2::VERSION
        ));
    };
    match checked {
        Err(e) => Unreadable(format!("{}: {e}", file.display())),
        Ok(Ok(n)) => Holds(format!("{n} vectors of {version} agree")),
        Ok(Err(why)) => Fails(why),
    }
}

fn red_packet(event: &PublicEvent, ticket: Option<u32>, amount: Option<u64>) -> Result<String, String> {
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let verdict = match &cli.what {
        What::RedPacket { event, ticket, amount } => match read::<PublicEvent>(event) {
            Ok(e) => match red_packet(&e, *ticket, *amount) {
                Ok(said) => Holds(said),
                Err(why) => Fails(why),
            },
            Err(e) => Unreadable(e),
        },
        What::Draw { published } => draw(published),
        What::Receipt { receipt: file, draw } => receipt(file, draw),
        What::Vectors { file } => vectors(file),
    };
    match verdict {
        Holds(said) => {
            println!("ok: {said}");
            ExitCode::SUCCESS
        }
        Fails(why) => {
            println!("FAILED: {why}");
            ExitCode::from(1)
        }
        Unreadable(why) => {
            eprintln!("unreadable: {why}");
            ExitCode::from(2)
        }
        Excluded(why) => {
            println!("{why}");
            ExitCode::from(3)
        }
    }
}
