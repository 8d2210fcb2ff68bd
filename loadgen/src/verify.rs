//! `ticketgrab-verify`: checks what an event publishes, as an auditor would, trusting nothing but
//! the published data and the algorithms' descriptions (shared/src/domain/red_packet.rs and
//! draw.rs).
//!
//!   ticketgrab-verify red-packet <event.json> [--ticket N --amount V]
//!       the event as `GET /events/{id}` shows it after the sale: its seed hashes to the
//!       commitment published at release, and the split is exact (and ticket N's amount is V)
//!   ticketgrab-verify draw <published.json>
//!       a draw as published: the secret hashes to the commitment, the entrants to the root, and
//!       the order is the one they derive
//!   ticketgrab-verify vectors <fairness-v1.json>
//!       docs/FAIRNESS.md's test vectors (tests/vectors/): every one recomputed
//!
//! Exit 0 when it checks out, 1 (with the reason) when it does not, 2 when the input is unreadable.

use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};
use serde::Deserialize;
use shared::domain::{
    draw::Published,
    fairness_vectors::{self, Vectors},
    red_packet::{self, AmountSeed},
};

#[derive(Parser)]
#[command(version, about = "Checks an event's published red-packet split or draw, or docs/FAIRNESS.md's vectors")]
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
    /// A published draw (ticket-draw/v1).
    Draw { published: PathBuf },
    /// docs/FAIRNESS.md's test vectors, each recomputed.
    Vectors { file: PathBuf },
}

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

fn read<T: serde::de::DeserializeOwned>(path: &PathBuf) -> Result<T, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
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
    let checked = match &cli.what {
        What::RedPacket { event, ticket, amount } => match read::<PublicEvent>(event) {
            Ok(e) => red_packet(&e, *ticket, *amount),
            Err(e) => {
                eprintln!("unreadable: {e}");
                return ExitCode::from(2);
            }
        },
        What::Draw { published } => match read::<Published>(published) {
            Ok(p) => p.verify().map(|()| {
                format!(
                    "the secret matches the commitment, {} entrants hash to the root, and the order of {} places is theirs",
                    p.entrants.len(),
                    p.order.len()
                )
            })
            .map_err(|e| e.to_string()),
            Err(e) => {
                eprintln!("unreadable: {e}");
                return ExitCode::from(2);
            }
        },
        What::Vectors { file } => match read::<Vectors>(file) {
            Ok(v) => fairness_vectors::check(&v).map(|n| format!("{n} vectors of {} agree", v.version)),
            Err(e) => {
                eprintln!("unreadable: {e}");
                return ExitCode::from(2);
            }
        },
    };
    match checked {
        Ok(said) => {
            println!("ok: {said}");
            ExitCode::SUCCESS
        }
        Err(why) => {
            println!("FAILED: {why}");
            ExitCode::from(1)
        }
    }
}
