//! refusals: what a grab of a sold-out event costs, without and with the sold-out memory
//! (docs/DESIGN.md section 6). The grab handler runs in-process, one `Grab` as one Lambda
//! environment holds it, on the stack's redis-server and a replica of it that this bench starts
//! (the reader). Refused grabs per second, and Redis calls per refusal on the primary and on the
//! replica, in alternating rounds; the medians, and their ratio.

use std::{
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use bench::measure::{calls, median, reset};
use clap::Parser;
use futures::StreamExt;
use serde_json::json;
use shared::{domain::EventId, http::apigw};
use time::OffsetDateTime;

#[derive(Parser)]
#[command(about = "Grabs of a sold-out event, without and with the sold-out memory")]
struct Args {
    /// Refused grabs per round and mode.
    #[arg(long, default_value_t = 20_000)]
    refusals: usize,
    /// Grabs in flight at once (one environment's concurrent requests, as the runner serves them).
    #[arg(long, default_value_t = 50)]
    concurrency: usize,
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Print each round's commands on the primary and the replica.
    #[arg(long)]
    verbose: bool,
}

type Failure = Box<dyn std::error::Error + Send + Sync>;

/// A replica of the stack's redis-server, stopped when dropped.
struct Replica(Child, u16);

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_dir_all(std::env::temp_dir().join(format!("refusals-replica-{}", self.1)));
    }
}

#[tokio::main]
async fn main() -> Result<(), Failure> {
    let args = Args::parse();
    let settings = local_runner::LocalSettings::from_env()?;
    let token = settings.gate.auth_token.clone().unwrap_or_default();
    let primary_url = settings.gate.redis_url.clone();
    let primary_port = primary_url.rsplit(':').next().unwrap_or("6379").trim_end_matches('/').to_owned();
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let dir = std::env::temp_dir().join(format!("refusals-replica-{port}"));
    std::fs::create_dir_all(&dir)?;
    let child = Command::new("redis-server")
        // A replica's full sync writes an RDB file in its --dir: one of its own, never the checkout
        // (nor a shared temp dir, where another server would load it).
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(&dir)
        .args(["--replicaof", "127.0.0.1", &primary_port, "--masterauth", &token, "--requirepass", &token])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let replica = Replica(child, port);
    let replica_url = format!("redis://127.0.0.1:{}", replica.1);
    let open = |url: &str| shared::gate::with_token(url, Some(&token)).map(redis::Client::open);
    let mut primary = open(&primary_url)??.get_multiplexed_async_connection().await?;
    let mut reader = loop {
        if let Ok(mut conn) = open(&replica_url)??.get_multiplexed_async_connection().await {
            let info: String = redis::cmd("INFO").arg("replication").query_async(&mut conn).await?;
            if info.contains("master_link_status:up") {
                break conn;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    let sdk = settings.sdk_config().await;
    let run = uuid::Uuid::now_v7().simple().to_string();
    let name = format!("refusals-{}", &run[..16]);
    local_runner::provision::ensure_table(&aws_sdk_dynamodb::Client::new(&sdk), &name).await?;
    let (queue_url, _) = local_runner::provision::ensure_queues(&aws_sdk_sqs::Client::new(&sdk), &name).await?;
    let build = |memory: Duration| {
        let mut s = settings.clone();
        s.store.table_name = name.clone();
        s.gate.reader_url = Some(replica_url.clone());
        s.gate.sold_out_memory = memory;
        s
    };
    let without = local_runner::Functions::build(&build(Duration::ZERO), &queue_url).await?;
    let with = local_runner::Functions::build(&build(Duration::from_secs(1)), &queue_url).await?;

    // One ticket, sold before the rounds.
    let now = OffsetDateTime::now_utc();
    let event = bench::sales::open_event(
        EventId::parse(&format!("refusals-{}", &run[..12]))?,
        "refusals",
        1,
        now - time::Duration::minutes(1),
    );
    without.store.put_event(&event).await?;
    without.gate.warm(&event).await?;
    let sale = bench::sales::Sale::new(event.id.clone(), settings.hash.clone())?;
    let request = |user: &str| -> Result<lambda_http::Request, Failure> {
        Ok(apigw::into_request(serde_json::from_str(&sale.request(user))?))
    };
    let sold = without.grab.handle(request("the-winner")?).await;
    assert_eq!(sold.status().as_u16(), 202, "the one ticket is sold first");

    println!(
        "refusals: {} refused grabs per round and mode, {} in flight, {} rounds (alternating); one grab environment",
        args.refusals, args.concurrency, args.rounds
    );
    let mut results: [(Vec<f64>, Vec<f64>, Vec<f64>); 2] = Default::default();
    for round in 0..args.rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for mode in order {
            let functions = if mode == 0 { &without } else { &with };
            let requests: Vec<lambda_http::Request> =
                (0..args.refusals).map(|i| request(&format!("fan-{round}-{mode}-{i}"))).collect::<Result<_, _>>()?;
            reset(&mut primary).await?;
            reset(&mut reader).await?;
            let started = Instant::now();
            let statuses: Vec<u16> = futures::stream::iter(requests)
                .map(|req| async move { functions.grab.handle(req).await.status().as_u16() })
                .buffer_unordered(args.concurrency)
                .collect()
                .await;
            let seconds = started.elapsed().as_secs_f64();
            let refused = statuses.iter().filter(|s| **s == 409).count();
            assert_eq!(refused, args.refusals, "every grab of the sold-out event is refused 409");
            let n = args.refusals as f64;
            if args.verbose {
                for (server, conn) in [("primary", &mut primary), ("replica", &mut reader)] {
                    let info: String = redis::cmd("INFO").arg("commandstats").query_async(conn).await?;
                    let counted: Vec<&str> = info.lines().filter(|l| l.starts_with("cmdstat_")).collect();
                    println!("  round {round}, {}: {server}: {counted:?}", if mode == 0 { "without" } else { "with" });
                }
            }
            results[mode].0.push(n / seconds);
            results[mode].1.push(calls(&mut primary).await? as f64 / n);
            results[mode].2.push(calls(&mut reader).await? as f64 / n);
        }
    }
    let name = ["without the memory (every refusal runs grab.lua)", "with the memory (SOLD_OUT_MEMORY_MS=1000)"];
    println!("{:<52} {:>14} {:>20} {:>20}", "", "refused/s", "primary calls/refusal", "replica calls/refusal");
    let mut report = Vec::new();
    for mode in 0..2 {
        let (rate, on_primary, on_replica) =
            (median(results[mode].0.clone()), median(results[mode].1.clone()), median(results[mode].2.clone()));
        println!("{:<52} {:>14.0} {:>20.4} {:>20.4}", name[mode], rate, on_primary, on_replica);
        report.push(json!({ "mode": name[mode], "refused_per_s": rate, "primary_calls_per_refusal": on_primary,
            "replica_calls_per_refusal": on_replica, "rounds": results[mode].0 }));
    }
    let ratio = median(results[1].0.clone()) / median(results[0].0.clone());
    println!("with / without: {ratio:.2}x the refusals per second");
    if let Some(path) = args.json {
        std::fs::write(path, serde_json::to_string_pretty(&json!({ "modes": report, "ratio": ratio }))?)?;
    }
    Ok(())
}
