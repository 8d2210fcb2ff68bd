//! red-packets: what red-packet amounts cost a sale (docs/DESIGN.md section 11). The grab
//! handler's decision (claims, verify hash, grab.lua, the reply; not the send to SQS, whose cost is
//! the queue's) runs in-process, as one Lambda environment holds it, on a plain sale and on a
//! red-packet sale of the same size, in alternating rounds: grabs per second and Redis calls per
//! grab for each, their medians and ratio. Beside them, the split's own time at 20,000 and 100,000
//! numbers (computed once per event per environment).

use std::time::Instant;

use bench::measure::{calls, median, reset};
use clap::Parser;
use futures::StreamExt;
use serde_json::json;
use shared::{
    domain::{
        EventId,
        red_packet::{AmountSeed, Currency, RedPacket},
    },
    http::apigw,
};
use time::OffsetDateTime;

#[derive(Parser)]
#[command(about = "Grabs of a plain sale beside a red-packet sale of the same size")]
struct Args {
    /// Tickets per sale (every grab wins).
    #[arg(long, default_value_t = 2_000)]
    tickets: u32,
    /// Grabs in flight at once (one environment's concurrent requests).
    #[arg(long, default_value_t = 50)]
    concurrency: usize,
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

type Failure = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), Failure> {
    let args = Args::parse();
    let settings = local_runner::LocalSettings::from_env()?;
    let token = settings.gate.auth_token.clone();
    let url = shared::gate::with_token(&settings.gate.redis_url, token.as_deref())?;
    let mut redis = redis::Client::open(url)?.get_multiplexed_async_connection().await?;

    let sdk = settings.sdk_config().await;
    let run = uuid::Uuid::now_v7().simple().to_string();
    let name = format!("red-packets-{}", &run[..16]);
    let mut settings = settings.clone();
    settings.store.table_name = name.clone();
    local_runner::provision::ensure_table(&aws_sdk_dynamodb::Client::new(&sdk), &name).await?;
    let (queue_url, _) = local_runner::provision::ensure_queues(&aws_sdk_sqs::Client::new(&sdk), &name).await?;
    let functions = local_runner::Functions::build(&settings, &queue_url).await?;

    println!(
        "red-packets: {} grabs per round and sale (every one wins), {} in flight, {} rounds (alternating); one grab environment, the decision without the send",
        args.tickets, args.concurrency, args.rounds
    );
    let mut results: [(Vec<f64>, Vec<f64>); 2] = Default::default();
    for round in 0..args.rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for mode in order {
            let id = EventId::parse(&format!("rp-{}-{round}-{mode}", &run[..12]))?;
            let mut event = bench::sales::open_event(
                id.clone(),
                "red packets",
                args.tickets,
                OffsetDateTime::now_utc() - time::Duration::minutes(1),
            );
            if mode == 1 {
                event.red_packet = Some(RedPacket {
                    total: u64::from(args.tickets) * 100,
                    currency: Currency::parse("CNY")?,
                    seed: AmountSeed::generate(),
                });
            }
            functions.store.put_event(&event).await?;
            functions.gate.warm(&event).await?;
            let sale = bench::sales::Sale::new(id, settings.hash.clone())?;
            let requests: Vec<lambda_http::Request> = (0..args.tickets)
                .map(|i| Ok(apigw::into_request(serde_json::from_str(&sale.request(&format!("fan-{i}")))?)))
                .collect::<Result<_, Failure>>()?;
            reset(&mut redis).await?;
            let started = Instant::now();
            let replies: Vec<(u16, bool)> = futures::stream::iter(requests)
                .map(|req| async {
                    match functions.grab.decide(req).await {
                        Ok(d) => {
                            let body: serde_json::Value =
                                serde_json::from_slice(d.response.body().as_ref()).unwrap_or_default();
                            (d.response.status().as_u16(), body.get("amount").is_some())
                        }
                        Err(_) => (0, false),
                    }
                })
                .buffer_unordered(args.concurrency)
                .collect()
                .await;
            let seconds = started.elapsed().as_secs_f64();
            assert!(replies.iter().all(|(s, _)| *s == 202), "every grab wins");
            assert!(
                replies.iter().all(|(_, amount)| *amount == (mode == 1)),
                "red packets, and only they, carry amounts"
            );
            let n = f64::from(args.tickets);
            results[mode].0.push(n / seconds);
            results[mode].1.push(calls(&mut redis).await? as f64 / n);
        }
    }
    let names = ["a plain sale", "red packets (an amount in each reply)"];
    println!("{:<40} {:>12} {:>16}", "", "grabs/s", "redis calls/grab");
    let mut report = Vec::new();
    for mode in 0..2 {
        let (rate, per_grab) = (median(results[mode].0.clone()), median(results[mode].1.clone()));
        println!("{:<40} {:>12.0} {:>16.3}", names[mode], rate, per_grab);
        report.push(json!({ "sale": names[mode], "grabs_per_s": rate, "redis_calls_per_grab": per_grab, "rounds": results[mode].0 }));
    }
    let ratio = median(results[1].0.clone()) / median(results[0].0.clone());
    println!("red packets / plain: {ratio:.2}x the grabs per second");

    let mut splits = Vec::new();
    for n in [20_000u32, 100_000] {
        let packet =
            RedPacket { total: u64::from(n) * 100, currency: Currency::parse("CNY")?, seed: AmountSeed::generate() };
        let times: Vec<f64> = (0..5)
            .map(|_| {
                let started = Instant::now();
                std::hint::black_box(packet.split(n));
                started.elapsed().as_secs_f64() * 1_000.0
            })
            .collect();
        let ms = median(times);
        println!("the split of {n} numbers (once per event per environment): {ms:.1} ms");
        splits.push(json!({ "numbers": n, "ms": ms }));
    }
    if let Some(path) = args.json {
        std::fs::write(
            path,
            serde_json::to_string_pretty(&json!({ "sales": report, "ratio": ratio, "splits": splits }))?,
        )?;
    }
    Ok(())
}
