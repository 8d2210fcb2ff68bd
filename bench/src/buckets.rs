//! buckets: one event over 1, 2 and 3 Redis buckets (docs/DESIGN.md section 6, "Buckets") on the
//! stack's three-master Redis Cluster, through the gate as the grab handler calls it.
//!
//! - **Scaling**: grabs per second with 1, 2 and 3 buckets, every grab winning (the event holds a
//!   number for each user), with the server time per grab summed over the masters and the busiest
//!   master's share of it.
//! - **Paths**, on one redis-server (the same CPU for every kind): server time per grab on the
//!   unsharded script, on a sharded event's home path (the user's home has a number), and on its
//!   moved-home path (every user homed at an empty bucket: grab.lua answers DRY, numbers move home
//!   from a sibling, move_out.lua there and move_in.lua at home, half the sibling's free numbers up
//!   to 64 at a time, and grab.lua decides at home), with script calls per grab.
//!
//! Rounds alternate between the kinds, so machine noise hits all alike; medians over the rounds,
//! and the ratios to the unsharded event measured in the same run. On a machine with fewer cores
//! than masters (and the bench beside them) the grabs per second measure the machine, not the
//! masters; the last column derives what the event would take with each master on its own core:
//! one over the busiest master's server time per grab.
//! `scripts/stack start` then `cargo run --release -p bench --bin buckets -- [--rounds 5]`.

use std::time::Instant;

use bench::measure::median;
use clap::Parser;
use futures::StreamExt;
use redis::AsyncCommands;
use shared::{
    config::GrabPolicy,
    domain::{Email, EventId, OrderId, UserId, event::epoch_ms, order::MessageHead},
    gate::{Gate, GrabAttempt, GrabOutcome, keys},
};
use time::OffsetDateTime;

#[derive(Parser)]
#[command(about = "One event over 1, 2 and 3 Redis buckets on the local cluster")]
struct Args {
    #[arg(long, env = "REDIS_CLUSTER_URL", default_value = "redis://127.0.0.1:16381")]
    cluster_url: String,
    /// One redis-server, where the paths are measured side by side on the same CPU.
    #[arg(long, env = "REDIS_URL", default_value = "redis://127.0.0.1:16379")]
    redis_url: String,
    /// Grabs per round and kind, each by another user, each winning.
    #[arg(long, default_value_t = 20_000)]
    grabs: u32,
    /// Grabs in flight at once.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Only the paths, on the one server (not the cluster's scaling).
    #[arg(long)]
    paths_only: bool,
    /// Count the one server's instructions per grab too: it runs under valgrind's callgrind,
    /// dumping into this directory (as gate-bench's `--callgrind`; scripts/bench starts it). Use few
    /// grabs: callgrind runs Redis ~50x slower.
    #[arg(long)]
    callgrind: Option<std::path::PathBuf>,
}

type Failure = Box<dyn std::error::Error + Send + Sync>;

/// What one round of one kind measured.
#[derive(Clone, Copy, Default)]
struct Round {
    per_second: f64,
    /// Scripts' server time per grab, all masters together (us).
    server_us: f64,
    /// The busiest master's share of the script runs.
    busiest: f64,
    /// Script runs per grab, all masters together.
    scripts: f64,
    /// The server's instructions per grab, with `--callgrind` (the one server only).
    instructions: Option<f64>,
}

#[tokio::main]
async fn main() -> Result<(), Failure> {
    let args = Args::parse();
    let token = std::env::var("REDIS_AUTH_TOKEN").ok().filter(|t| !t.is_empty());
    let settings = |url: &str, cluster: bool| bench::sales::gate_settings(url, cluster, token.clone());
    let cluster = Target {
        gate: Gate::new(&settings(&args.cluster_url, true))?,
        masters: if args.paths_only { Vec::new() } else { masters(&args.cluster_url, token.as_deref()).await? },
        callgrind: None,
    };
    let single = Target {
        callgrind: args.callgrind.clone(),
        gate: Gate::new(&settings(&args.redis_url, false))?,
        masters: vec![
            redis::Client::open(shared::gate::with_token(&args.redis_url, token.as_deref())?)?
                .get_multiplexed_async_connection()
                .await?,
        ],
    };
    println!(
        "buckets: a {}-master cluster and one redis-server; {} grabs per round and kind, {} in flight, {} rounds (kinds alternating); {} cores",
        cluster.masters.len(),
        args.grabs,
        args.concurrency,
        args.rounds,
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    );
    // Scaling on the cluster; then the paths on one server, where every kind meets the same CPU
    // (on the cluster, one bucket keeps one master busy and three keep three, sharing the cores).
    let kinds: [(&str, &Target, u16, Path); 6] = [
        ("cluster: 1 bucket (unsharded)", &cluster, 1, Path::Home),
        ("cluster: 2 buckets", &cluster, 2, Path::Home),
        ("cluster: 3 buckets", &cluster, 3, Path::Home),
        ("one server: unsharded", &single, 1, Path::HomeOnly),
        ("one server: 3 buckets, home path", &single, 3, Path::HomeOnly),
        ("one server: 3 buckets, moved-home path", &single, 3, Path::Sibling),
    ];
    let mut results: Vec<Vec<Round>> = vec![Vec::new(); kinds.len()];
    for round in 0..args.rounds {
        for (i, (name, target, buckets, path)) in kinds.iter().enumerate() {
            if args.paths_only && i < 3 {
                continue;
            }
            let r = run(target, &args, *buckets, *path, round).await?;
            println!(
                "  round {} {name}: {:.0} grabs/s, {:.1} us server time per grab, {:.2} scripts per grab, {:.0}% of them on the busiest master",
                round + 1,
                r.per_second,
                r.server_us,
                r.scripts,
                r.busiest * 100.0
            );
            results[i].push(r);
        }
    }
    if let Some(first) = results.iter().position(|r| !r.is_empty()) {
        results[..first].iter_mut().for_each(|r| r.push(Round::default()));
    }
    let med = |i: usize, f: fn(&Round) -> f64| median(results[i].iter().map(f).collect());
    println!("\nmedians over {} rounds (ratios to the unsharded event on the same Redis):", args.rounds);
    println!(
        "| event | grabs/s here | vs unsharded | server us per grab | vs unsharded | scripts per grab | on the busiest master | ceiling, a core per master |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut rows = Vec::new();
    for (i, (name, ..)) in kinds.iter().enumerate() {
        if args.paths_only && i < 3 {
            continue;
        }
        let base = if i < 3 { 0 } else { 3 };
        let (rate, us, busiest, scripts) =
            (med(i, |r| r.per_second), med(i, |r| r.server_us), med(i, |r| r.busiest), med(i, |r| r.scripts));
        let (rate0, us0) = (med(base, |r| r.per_second), med(base, |r| r.server_us));
        // With each master on its own core or node, the busiest one bounds the event: its share of
        // the scripts times their time. Derived from the measured figures (cluster rows only).
        let ceiling = if i < 3 { format!("{:.0}/s", 1e6 / (us * busiest)) } else { "-".to_owned() };
        println!(
            "| {name} | {rate:.0} | {:.2}x | {us:.1} | {:.2}x | {scripts:.2} | {:.0}% | {ceiling} |",
            rate / rate0,
            us / us0,
            busiest * 100.0
        );
        rows.push(serde_json::json!({
            "event": name, "grabs_per_second": rate, "server_us_per_grab": us,
            "busiest_master_share_of_scripts": busiest, "scripts_per_grab": scripts,
            "rate_vs_unsharded": rate / rate0, "server_time_vs_unsharded": us / us0,
        }));
    }
    if args.callgrind.is_some() {
        let ir = |i: usize| median(results[i].iter().filter_map(|r| r.instructions).collect());
        let base = ir(3);
        for (i, (name, ..)) in kinds.iter().enumerate().skip(3) {
            let n = ir(i);
            println!("instructions per grab (callgrind): {name:<36} {n:>8.0}  {:.2}x the unsharded", n / base);
            rows[i - if args.paths_only { 3 } else { 0 }]["instructions_per_grab"] = serde_json::json!(n);
        }
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&serde_json::json!({ "rows": rows }))?)?;
    }
    Ok(())
}

/// A Redis to measure on: the gate connected to it, a connection to each of its masters, and the
/// callgrind dumps' directory when it runs under callgrind.
struct Target {
    gate: Gate,
    masters: Vec<redis::aio::MultiplexedConnection>,
    callgrind: Option<std::path::PathBuf>,
}

#[derive(Clone, Copy, PartialEq)]
enum Path {
    /// Users anywhere; the event holds a number for each (the last few moved home from siblings).
    Home,
    /// Users anywhere, the event holding three times their number: every grab served at home.
    HomeOnly,
    /// Every user homed at bucket 0, which holds none: every number moved home from a sibling.
    Sibling,
}

async fn run(target: &Target, args: &Args, buckets: u16, path: Path, round: usize) -> Result<Round, Failure> {
    let (gate, masters) = (&target.gate, &target.masters);
    let id = EventId::parse(&format!("bench-buckets-{}", uuid::Uuid::now_v7().simple()))?;
    let capacity = match path {
        Path::Home => args.grabs,
        Path::HomeOnly | Path::Sibling => args.grabs * 3,
    };
    let mut event = bench::sales::open_event(
        id.clone(),
        "buckets bench",
        capacity,
        OffsetDateTime::now_utc() - time::Duration::minutes(1),
    );
    event.buckets = buckets;
    gate.warm(&event).await?;
    let layout = keys::Buckets::of(&id, buckets);
    let user = |i: u32| UserId::parse(&format!("r{round}-u{i}")).expect("a user id");
    let users: Vec<UserId> = match path {
        Path::Home | Path::HomeOnly => (0..args.grabs).map(user).collect(),
        Path::Sibling => (0..).map(user).filter(|u| layout.home(u).index() == 0).take(args.grabs as usize).collect(),
    };
    if path == Path::Sibling {
        let mut conn = gate.connection().await?;
        let _: () = conn.del(keys::seats(layout.get(0).expect("bucket 0"))).await?;
    }
    for m in masters {
        let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query_async(&mut m.clone()).await?;
    }
    if target.callgrind.is_some() {
        bench::measure::callgrind_control("-z").map_err(|e| e.to_string())?;
    }
    let email = Email::parse("fan@example.com")?;
    let started = Instant::now();
    let policy = GrabPolicy::default();
    let outcomes: Vec<Result<GrabOutcome, shared::gate::GateError>> = futures::stream::iter(users.iter())
        .map(|user| {
            let (id, email) = (&id, &email);
            async move {
                let order = OrderId::generate();
                let now = OffsetDateTime::now_utc();
                let head = MessageHead::new(&order, id, user, email, "2026-11-26T00:00:00Z");
                let attempt = GrabAttempt { event: id, user, order_id: &order, head: &head, clock_ms: epoch_ms(now) };
                gate.grab(&attempt, policy).await.map(|g| g.outcome)
            }
        })
        .buffer_unordered(args.concurrency)
        .collect()
        .await;
    let elapsed = started.elapsed().as_secs_f64();
    let instructions = match &target.callgrind {
        Some(dir) => Some(bench::measure::dumped_instructions(dir).map_err(|e| e.to_string())? / users.len() as f64),
        None => None,
    };
    let granted = outcomes.iter().filter(|o| matches!(o, Ok(GrabOutcome::Granted { .. }))).count();
    if granted != users.len() {
        let failed = outcomes.iter().find(|o| !matches!(o, Ok(GrabOutcome::Granted { .. })));
        return Err(format!("{granted} of {} grabs won; one: {failed:?}", users.len()).into());
    }
    let mut per_master = Vec::new();
    let mut total = 0.0;
    for m in masters {
        let (usec, calls) = script_stats(&mut m.clone()).await?;
        per_master.push(calls);
        total += usec;
    }
    let scripts: u64 = per_master.iter().sum();
    let grabs = users.len() as f64;
    // The event's keys go with their cache's expiry; the bench leaves nothing of its own.
    let mut conn = gate.connection().await?;
    for b in layout.iter() {
        let _: () = conn.del(&keys::cache(b)).await?;
    }
    Ok(Round {
        per_second: grabs / elapsed,
        server_us: total / grabs,
        busiest: per_master.iter().copied().max().unwrap_or(0) as f64 / scripts.max(1) as f64,
        scripts: scripts as f64 / grabs,
        instructions,
    })
}

/// The scripts' server time (us) and runs on one server since its counters were reset.
async fn script_stats(conn: &mut redis::aio::MultiplexedConnection) -> Result<(f64, u64), Failure> {
    let info: String = redis::cmd("INFO").arg("commandstats").query_async(conn).await?;
    let mut usec = 0.0;
    let mut calls = 0;
    for line in info.lines() {
        let Some(rest) = line.strip_prefix("cmdstat_evalsha:").or_else(|| line.strip_prefix("cmdstat_eval:")) else {
            continue;
        };
        let field = |name: &str| rest.split(',').find_map(|kv| kv.strip_prefix(&format!("{name}=")));
        usec += field("usec").and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        calls += field("calls").and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    }
    Ok((usec, calls))
}

/// A connection to each master of the cluster (`CLUSTER NODES` asked of the seed).
async fn masters(url: &str, token: Option<&str>) -> Result<Vec<redis::aio::MultiplexedConnection>, Failure> {
    let seed = url.split(',').next().unwrap_or(url);
    let mut conn =
        redis::Client::open(shared::gate::with_token(seed, token)?)?.get_multiplexed_async_connection().await?;
    let nodes: String = redis::cmd("CLUSTER").arg("NODES").query_async(&mut conn).await?;
    let mut masters = Vec::new();
    for line in nodes.lines().filter(|l| l.split(' ').nth(2).is_some_and(|f| f.contains("master"))) {
        let addr = line.split(' ').nth(1).and_then(|a| a.split('@').next()).ok_or("CLUSTER NODES")?;
        let client = redis::Client::open(shared::gate::with_token(&format!("redis://{addr}"), token)?)?;
        masters.push(client.get_multiplexed_async_connection().await?);
    }
    Ok(masters)
}
