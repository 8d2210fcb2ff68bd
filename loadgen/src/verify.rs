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
//!   ticketgrab-verify vectors <fairness-v1.json | fairness-v2.json | fairness-documents.json>
//!       docs/FAIRNESS.md's test vectors (tests/vectors/), picked by their `version`: every one
//!       recomputed (the documents' vectors: each case's verdict, by the checks above)
//!
//! The checks themselves are `loadgen::verdict`'s; this file reads the files and prints.
//!
//! Exit codes:
//!   0  it checks out (what was checked is printed)
//!   1  it does not (the first reason printed)
//!   2  an input is unreadable (not a file, not JSON, not the document named)
//!   3  an exclusion proven: a receipt that checks names a leaf the signed draw left out

use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};
use loadgen::{
    document_vectors,
    verdict::{self, PublicEvent, Verdict, Verdict::*},
};
use serde_json::Value;
use shared::domain::{fairness_vectors, fairness_vectors_v2};

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
    /// docs/FAIRNESS.md's test vectors (fairness-v1.json, fairness-v2.json or fairness-documents.json), each
    /// recomputed.
    Vectors { file: PathBuf },
}

/// A file's JSON, read strictly (docs/FAIRNESS.md section 8: a member named twice is unreadable).
fn read<T: serde::de::DeserializeOwned>(path: &PathBuf) -> Result<T, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let value = shared::domain::strict_json::parse(text.as_bytes()).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_value(value).map_err(|e| format!("{}: {e}", path.display()))
}

/// Each file one page (or a whole draw), or an array of pages.
fn read_all(paths: &[PathBuf]) -> Result<Vec<Value>, Verdict> {
    let mut pages = Vec::new();
    for path in paths {
        match read::<Value>(path).map_err(Unreadable)? {
            Value::Array(more) if more.is_empty() => {
                return Err(Unreadable(format!("{}: an array of no page", path.display())));
            }
            Value::Array(more) => pages.extend(more),
            page => pages.push(page),
        }
    }
    Ok(pages)
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
    } else if version == document_vectors::VERSION {
        serde_json::from_value::<document_vectors::Vectors>(doc).map(|v| document_vectors::check(&v))
    } else {
        return Unreadable(format!(
            "{}: version {version:?}, none of {}, {} and {}",
            file.display(),
            fairness_vectors::VERSION,
            fairness_vectors_v2::VERSION,
            document_vectors::VERSION
        ));
    };
    match checked {
        Err(e) => Unreadable(format!("{}: {e}", file.display())),
        Ok(Ok(n)) => Holds(format!("{n} vectors of {version} agree")),
        Ok(Err(why)) => Fails(why),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let verdict = match &cli.what {
        What::RedPacket { event, ticket, amount } => match read::<PublicEvent>(event) {
            Ok(e) => match verdict::red_packet(&e, *ticket, *amount) {
                Ok(said) => Holds(said),
                Err(why) => Fails(why),
            },
            Err(e) => Unreadable(e),
        },
        What::Draw { published } => read_all(published).map_or_else(|v| v, verdict::draw),
        What::Receipt { receipt: file, draw } => match (read::<Value>(file), read_all(draw)) {
            (Err(e), _) => Unreadable(e),
            (_, Err(v)) => v,
            (Ok(shown), Ok(pages)) => verdict::receipt(shown, pages),
        },
        What::Vectors { file } => vectors(file),
    };
    match &verdict {
        Holds(said) => println!("ok: {said}"),
        Fails(why) => println!("FAILED: {why}"),
        Unreadable(why) => eprintln!("unreadable: {why}"),
        Excluded(why) => println!("{why}"),
    }
    ExitCode::from(verdict.exit_code())
}
