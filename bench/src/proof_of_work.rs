//! proof-of-work: what `ticket-pow/v1` costs a client and the server at each difficulty
//! (docs/DESIGN.md section 11). The client's cost is the solve: hashes tried and time, per user
//! (each user's work is its own: the input names them), medians over many users; the server's is
//! one check, timed over many. Both run the product's own code (`shared::domain::proof_of_work`),
//! here on one core of this machine; a browser's or a phone's SHA-256 is slower.

use std::time::Instant;

use bench::measure::median;
use clap::Parser;
use serde_json::json;
use shared::domain::{EventId, UserId, proof_of_work};

#[derive(Parser)]
#[command(about = "ticket-pow/v1: a client's solve and the server's check at each difficulty")]
struct Args {
    /// Difficulties, in bits.
    #[arg(long, value_delimiter = ',', default_value = "12,16,20,22")]
    bits: Vec<u32>,
    /// Users solved at each difficulty (each user's work is different).
    #[arg(long, default_value_t = 40)]
    users: usize,
    /// Server checks timed at each difficulty.
    #[arg(long, default_value_t = 100_000)]
    checks: usize,
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let event = EventId::parse("bench-pow")?;
    let mut rows = Vec::new();
    println!(
        "ticket-pow/v1 on one core: per user, median over {} users; the server's check, median of 5 runs",
        args.users
    );
    println!(
        "{:>5} {:>14} {:>14} {:>12} {:>12} {:>14}",
        "bits", "2^bits", "hashes (mean)", "solve p50", "solve p90", "check (ns)"
    );
    for &bits in &args.bits {
        let mut times = Vec::with_capacity(args.users);
        let mut hashes = 0u64;
        let mut nonces = Vec::with_capacity(args.users);
        for i in 0..args.users {
            let user = UserId::parse(&format!("user-{bits}-{i}"))?;
            let started = Instant::now();
            let nonce = proof_of_work::solve(&event, &user, bits);
            times.push(started.elapsed().as_secs_f64());
            hashes += nonce.parse::<u64>()? + 1;
            nonces.push((user, nonce));
        }
        let mut sorted = times.clone();
        sorted.sort_by(f64::total_cmp);
        let p90 = sorted[(sorted.len() * 9 / 10).min(sorted.len() - 1)];
        let p50 = median(times);
        let per_check: Vec<f64> = (0..5)
            .map(|_| {
                let started = Instant::now();
                let mut ok = 0usize;
                for k in 0..args.checks {
                    let (user, nonce) = &nonces[k % nonces.len()];
                    ok += usize::from(proof_of_work::verify(&event, user, bits, nonce));
                }
                assert_eq!(ok, args.checks, "every solution checks");
                started.elapsed().as_secs_f64() * 1e9 / args.checks as f64
            })
            .collect();
        let check_ns = median(per_check);
        let mean = hashes as f64 / args.users as f64;
        println!(
            "{bits:>5} {:>14} {mean:>14.0} {:>10.1} ms {:>10.1} ms {check_ns:>14.0}",
            1u64 << bits,
            p50 * 1e3,
            p90 * 1e3
        );
        rows.push(json!({ "bits": bits, "expected_hashes": 1u64 << bits, "mean_hashes": mean,
            "solve_p50_ms": p50 * 1e3, "solve_p90_ms": p90 * 1e3, "check_ns": check_ns }));
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&json!({ "users": args.users, "rows": rows }))?)?;
    }
    Ok(())
}
