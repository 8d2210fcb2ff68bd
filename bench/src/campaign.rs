//! campaign: a seeded fault campaign that tries to break a sale (docs/RELIABILITY.md, "The fault
//! campaign"). Each run is one seed: an event of its own on the stack's Redis Cluster (three
//! masters, a replica each), sharded over three buckets on even seeds and not on odd ones, a crowd
//! that grabs, joins the waitlist when sold out, cancels some orders and retries on timeouts and
//! 503s, the mail consumer and reconcile running beside it, and faults injected at moments the
//! seed draws:
//!
//! - a bucket's opening field lost (a shard replaced: its data there, but from another history);
//! - a bucket's shard lost whole (its keys deleted, and the other buckets' sent records that lie on
//!   the same master);
//! - one key of a bucket lost by itself (its free numbers, outbox, line, line's heads or moves:
//!   evicted, or deleted by hand);
//! - the master of a bucket killed and its replica promoted (`CLUSTER FAILOVER TAKEOVER`), the old
//!   master started again after the run and made master again;
//! - SQS unreachable for seconds (grab's, cancel's and the waitlist's AWS endpoint a closed port);
//! - the mail consumer killed mid-batch, and started again seconds later;
//! - a give-back racing reconcile (a cancellation stored, then its give-back and reconcile's at
//!   once);
//! - another sale's backlog on the shared queue: thousands of its orders ahead of this sale's;
//! - rebuilds one after another (a quarter second apart) while the sold-out crowd joins the
//!   waitlist over a slow network to AWS (each join's durable write 1.5 s on its way, longer than
//!   a rebuild's wait for DynamoDB's index);
//! - SQS's counts reading 0 while messages are in flight;
//! - a ballot drawn beside the sale, its winners giving their tickets back while the draw is laid
//!   down and after.
//!
//! After the run, with every fault undone, it drains (the consumer and reconcile until nothing is
//! on its way) and checks from DynamoDB, Redis and the local SES: no number held twice; no user
//! told of two orders; every order a user was told of (`202`, a retry's `200`, a `202 PROMOTED`
//! join) ends `CONFIRMED`, or `CANCELLED` by that user, and its user's `GET .../order` never
//! answered `NO_ORDER`; one mail per order ever confirmed; every user told they wait still waits,
//! in the line, or holds an order; the queue's DLQ empty; the audit passes (no order `REJECTED`
//! among its checks). Each failing seed is printed with the command that replays it.
//!
//! `scripts/stack start`, then `cargo run -p bench --bin campaign -- --runs 10` (`scripts/bench
//! campaign` runs 200; `scripts/test` seeds 1, 4, 16, 19 and 21, which between them draw every
//! kind of fault). `--seed N` replays one run.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use aws_lambda_events::apigw::ApiGatewayV2httpRequest;
use clap::Parser;
use local_runner::{Functions, LocalSettings, provision};
use rand::{RngExt, SeedableRng, rngs::StdRng};
use redis::AsyncCommands;
use serde_json::{Value, json};
use shared::{
    domain::{EventId, OrderStatus, UserId, event::epoch_ms},
    gate::keys,
    http::{apigw, routes::Function},
};
use time::OffsetDateTime;

#[derive(Parser)]
struct Args {
    /// How many runs, seeds `first_seed..first_seed + runs`.
    #[arg(long, default_value_t = 10)]
    runs: u64,
    #[arg(long, default_value_t = 1)]
    first_seed: u64,
    /// Replay this one seed.
    #[arg(long)]
    seed: Option<u64>,
    /// These seeds, comma-separated (the test command's: between them every kind of fault).
    #[arg(long, value_delimiter = ',')]
    seeds: Vec<u64>,
    /// Print each seed's plan (its buckets and faults) and run nothing.
    #[arg(long)]
    plan: bool,
    /// Users per run.
    #[arg(long, default_value_t = 400)]
    users: usize,
    /// Tickets per run: hundreds, so the faults meet a live rush.
    #[arg(long, default_value_t = 150)]
    tickets: u32,
    /// Where the runs' results go, as JSON lines (one per run).
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Only these faults (opening-lost, keys-deleted, master-killed, sqs-down, mail-killed,
    /// give-back-race, key-lost, backlog, join-race, counts-lie); every run then has at least one
    /// of them.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Every run over this many buckets (by default 3 on even seeds, 1 on odd ones).
    #[arg(long)]
    buckets: Option<u16>,
    /// Faults strike within this many milliseconds of the rush's start.
    #[arg(long, default_value_t = 2_500)]
    fault_window_ms: u64,
    /// Clients asking at once.
    #[arg(long, default_value_t = 24)]
    parallel: usize,
}

/// What can go wrong in a run, injected at a moment the seed draws.
#[derive(Debug, Clone, PartialEq)]
enum Fault {
    /// A bucket's opening field removed: a shard replaced, its data there from another history.
    OpeningLost { bucket: u16 },
    /// A bucket's keys deleted, outbox and all: a shard lost whole.
    KeysDeleted { bucket: u16 },
    /// The master serving a bucket killed (SIGKILL) and its replica promoted.
    MasterKilled { bucket: u16 },
    /// Grab's AWS endpoint unreachable for a while (its sends fail).
    SqsDown { for_ms: u64 },
    /// The mail consumer killed mid-batch, started again after a while.
    MailKilled { for_ms: u64 },
    /// A cancellation stored, then its own give-back and reconcile's at once.
    GiveBackRace,
    /// One key of a bucket lost by itself.
    KeyLost { bucket: u16, key: LostKey },
    /// Another sale's orders on the shared queue, ahead of this sale's.
    Backlog { messages: u32 },
    /// Bucket 0 (the waitlist's line) found lost every quarter second, for a while, while the
    /// sold-out crowd joins.
    JoinRace { for_ms: u64 },
    /// SQS's counts read 0 for a while, whatever is on the queue.
    CountsLie { for_ms: u64 },
    /// A ballot of its own drawn beside the sale, its winners giving back while it is laid down.
    BallotCancels,
}

/// Which key of a bucket [`Fault::KeyLost`] takes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum LostKey {
    Seats,
    Outbox,
    Wait,
    Waiting,
    Moving,
}

impl LostKey {
    fn key(self, bucket: &keys::Bucket) -> String {
        match self {
            Self::Seats => keys::seats(bucket),
            Self::Outbox => keys::outbox(bucket),
            Self::Wait => keys::wait(bucket),
            Self::Waiting => keys::waiting(bucket),
            Self::Moving => keys::moving(bucket),
        }
    }
}

/// One run's plan: drawn from its seed alone.
#[derive(Debug)]
struct Plan {
    seed: u64,
    buckets: u16,
    /// (milliseconds after the rush starts, fault)
    faults: Vec<(u64, Fault)>,
}

impl Fault {
    fn kind(&self) -> &'static str {
        match self {
            Self::OpeningLost { .. } => "opening-lost",
            Self::KeysDeleted { .. } => "keys-deleted",
            Self::MasterKilled { .. } => "master-killed",
            Self::SqsDown { .. } => "sqs-down",
            Self::MailKilled { .. } => "mail-killed",
            Self::GiveBackRace => "give-back-race",
            Self::KeyLost { .. } => "key-lost",
            Self::Backlog { .. } => "backlog",
            Self::JoinRace { .. } => "join-race",
            Self::CountsLie { .. } => "counts-lie",
            Self::BallotCancels => "ballot-cancels",
        }
    }
}

impl Plan {
    fn draw(seed: u64, args: &Args) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let buckets = args.buckets.unwrap_or(if seed.is_multiple_of(2) { 3 } else { 1 });
        let mut faults = Vec::new();
        let wanted = rng.random_range(1..=3);
        // Drawn until the run has its faults (of the kinds asked for, when some are).
        while faults.len() < wanted {
            let at = rng.random_range(0..args.fault_window_ms.max(1));
            let bucket = rng.random_range(0..buckets);
            let fault = match rng.random_range(0..11) {
                0 => Fault::OpeningLost { bucket },
                1 => Fault::KeysDeleted { bucket },
                2 => Fault::MasterKilled { bucket },
                3 => Fault::SqsDown { for_ms: rng.random_range(500..3_000) },
                4 => Fault::MailKilled { for_ms: rng.random_range(500..4_000) },
                5 => Fault::GiveBackRace,
                6 => {
                    // The line lives at bucket 0; moves only between buckets.
                    let kinds: &[LostKey] = if buckets > 1 {
                        &[LostKey::Seats, LostKey::Outbox, LostKey::Wait, LostKey::Waiting, LostKey::Moving]
                    } else {
                        &[LostKey::Seats, LostKey::Outbox, LostKey::Wait, LostKey::Waiting]
                    };
                    let key = kinds[rng.random_range(0..kinds.len())];
                    let bucket = if matches!(key, LostKey::Wait | LostKey::Waiting) { 0 } else { bucket };
                    Fault::KeyLost { bucket, key }
                }
                7 => Fault::Backlog { messages: rng.random_range(1_500..3_000) },
                8 => Fault::JoinRace { for_ms: rng.random_range(2_000..5_000) },
                9 => Fault::BallotCancels,
                _ => Fault::CountsLie { for_ms: rng.random_range(4_000..12_000) },
            };
            if args.only.is_empty() || args.only.iter().any(|k| k == fault.kind()) {
                faults.push((at, fault));
            }
        }
        // One master down at a time (a shard lost whole and SQS unreachable together are fine: a
        // 202 whose send failed rests on its sent record, on another shard, and that record's
        // replica).
        let mut killed = false;
        faults.retain(|(_, f)| !matches!(f, Fault::MasterKilled { .. }) || !std::mem::replace(&mut killed, true));
        faults.sort_by_key(|(at, _)| *at);
        Self { seed, buckets, faults }
    }
}

/// What the crowd was told, as clients record it.
#[derive(Default)]
struct Told {
    /// user -> every order id a 202 or 200 named (a grab's, a retry's, a promoted join's)
    orders: HashMap<String, HashSet<String>>,
    /// users told they wait (201, or 200 already waiting)
    waiting: HashSet<String>,
    /// users whose cancellation was answered 200, or stored by the give-back race
    cancelled: HashSet<String>,
    /// replies by request and status ("grab 202")
    statuses: BTreeMap<String, u32>,
    /// user -> each reply, in order ("grab 503 BUSY", "grab 200 <order>"): what a broken promise
    /// was made of
    said: HashMap<String, Vec<String>>,
}

/// The stack's pieces one run uses: the functions as deployed (healthy), the same cut off from
/// AWS (SQS unreachable), and what the checks read.
struct Harness {
    settings: LocalSettings,
    healthy: Functions,
    cut_off: Functions,
    /// The functions behind a slow network to AWS ([`SLOW_NETWORK`] a request).
    slow: Functions,
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    dead_letters_url: String,
    /// While set, the crowd's requests go to `cut_off`.
    sqs_down: AtomicBool,
    /// While set, the crowd's joins go to `slow`.
    slow_joins: AtomicBool,
    event: EventId,
    buckets: keys::Buckets,
    template: HashMap<&'static str, Value>,
    told: Arc<Mutex<Told>>,
    /// What the ballot beside the sale came to (`Fault::BallotCancels`), when one was drawn.
    ballot: Mutex<Option<Result<String, String>>>,
    /// The run's seed: its users are `c<seed>-<n>`.
    seed: u64,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    // The functions' own log lines, when asked for (`RUST_LOG=info`): what a failing seed did.
    if std::env::var("RUST_LOG").is_ok() {
        let _ = tracing::subscriber::set_global_default(shared::telemetry::subscriber(
            &std::env::var("RUST_LOG").unwrap_or_default(),
            std::io::stderr,
        ));
    }
    let seeds: Vec<u64> = match args.seed {
        Some(seed) => vec![seed],
        None if !args.seeds.is_empty() => args.seeds.clone(),
        None => (args.first_seed..args.first_seed + args.runs).collect(),
    };
    let mut failed = Vec::new();
    let mut json = args.json.as_ref().map(|p| std::fs::File::create(p).expect("the results file"));
    let started = Instant::now();
    for &seed in &seeds {
        let plan = Plan::draw(seed, &args);
        if args.plan {
            println!("campaign: seed {seed}: {} buckets, {:?}", plan.buckets, plan.faults);
            continue;
        }
        let run_started = Instant::now();
        let outcome = run(&plan, &args).await;
        let took = run_started.elapsed();
        let faults: Vec<String> = plan.faults.iter().map(|(at, f)| format!("{f:?} at {at} ms")).collect();
        match &outcome {
            Ok(summary) => println!(
                "campaign: seed {seed} ({} bucket{}; {}) passed in {:.1} s: {summary}",
                plan.buckets,
                if plan.buckets == 1 { "" } else { "s" },
                faults.join(", "),
                took.as_secs_f64()
            ),
            Err(broken) => {
                println!(
                    "campaign: seed {seed} ({} bucket{}; {}) FAILED: {broken}",
                    plan.buckets,
                    if plan.buckets == 1 { "" } else { "s" },
                    faults.join(", ")
                );
                failed.push(seed);
            }
        }
        if let Some(file) = json.as_mut() {
            use std::io::Write;
            let line = json!({
                "seed": seed, "buckets": plan.buckets, "faults": faults, "seconds": took.as_secs_f64(),
                "passed": outcome.is_ok(), "detail": outcome.unwrap_or_else(|e| e),
            });
            let _ = writeln!(file, "{line}");
        }
    }
    println!(
        "campaign: {} runs in {:.0} s, {} failed{}",
        seeds.len(),
        started.elapsed().as_secs_f64(),
        failed.len(),
        if failed.is_empty() { String::new() } else { format!(": seeds {failed:?}") }
    );
    for seed in &failed {
        println!("campaign: replay with `cargo run -p bench --bin campaign -- --seed {seed}`");
    }
    if !failed.is_empty() {
        std::process::exit(1);
    }
}

/// One seeded run: the sale, its faults, the drain, the checks. `Ok(summary)` or `Err(what broke)`.
async fn run(plan: &Plan, args: &Args) -> Result<String, String> {
    let harness = Arc::new(Harness::new(plan, args).await?);
    let mut rng = StdRng::seed_from_u64(plan.seed ^ 0x5eed);
    let users: Vec<String> = (0..args.users).map(|i| format!("c{}-{i:03}", plan.seed)).collect();

    // The mail consumer and reconcile, as deployed: beside the sale, all along.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let consumer = Arc::new(Mutex::new(Some(spawn_consumer(&harness, stop_rx.clone()))));
    let reconciler = {
        let (h, mut stop) = (harness.clone(), stop_rx.clone());
        tokio::spawn(async move {
            while !*stop.borrow() {
                h.healthy.reconcile.run().await;
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(700)) => {}
                    _ = stop.changed() => {}
                }
            }
        })
    };

    // The crowd: each user's client, `--parallel` at a time.
    let rush = Instant::now();
    let gate = Arc::new(tokio::sync::Semaphore::new(args.parallel.max(1)));
    let clients: Vec<_> = users
        .iter()
        .map(|user| {
            let (h, gate, user) = (harness.clone(), gate.clone(), user.clone());
            let seed = rng.random::<u64>();
            tokio::spawn(async move {
                let _turn = gate.acquire().await.expect("the gate");
                client(&h, &user, seed).await
            })
        })
        .collect();

    // The faults, each at its moment.
    let mut killed_master = None;
    let mut restarts = Vec::new();
    for (at, fault) in &plan.faults {
        let due = rush + Duration::from_millis(*at);
        tokio::time::sleep_until(due.into()).await;
        match fault {
            Fault::OpeningLost { bucket } => harness.lose_opening(*bucket).await?,
            Fault::KeysDeleted { bucket } => harness.delete_keys(*bucket).await?,
            Fault::MasterKilled { bucket } => killed_master = Some(harness.kill_master(*bucket).await?),
            Fault::SqsDown { for_ms } => {
                harness.sqs_down.store(true, Ordering::SeqCst);
                let h = harness.clone();
                let for_ms = *for_ms;
                restarts.push(tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(for_ms)).await;
                    h.sqs_down.store(false, Ordering::SeqCst);
                }));
            }
            Fault::MailKilled { for_ms } => {
                if let Some(running) = consumer.lock().expect("consumer").take() {
                    running.abort();
                }
                let (h, consumer, stop, for_ms) = (harness.clone(), consumer.clone(), stop_rx.clone(), *for_ms);
                restarts.push(tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(for_ms)).await;
                    *consumer.lock().expect("consumer") = Some(spawn_consumer(&h, stop));
                }));
            }
            Fault::GiveBackRace => harness.give_back_race().await?,
            Fault::KeyLost { bucket, key } => harness.lose_key(*bucket, *key).await?,
            Fault::Backlog { messages } => {
                let (h, messages) = (harness.clone(), *messages);
                restarts.push(tokio::spawn(async move {
                    if let Err(e) = h.another_sales_backlog(messages).await {
                        println!("campaign: the backlog could not be queued: {e}");
                    }
                }));
            }
            Fault::JoinRace { for_ms } => {
                let (h, until) = (harness.clone(), Instant::now() + Duration::from_millis(*for_ms));
                h.slow_joins.store(true, Ordering::SeqCst);
                restarts.push(tokio::spawn(async move {
                    while Instant::now() < until {
                        let _ = h.lose_opening(0).await;
                        tokio::time::sleep(Duration::from_millis(250)).await;
                    }
                    h.slow_joins.store(false, Ordering::SeqCst);
                }));
            }
            Fault::BallotCancels => {
                let (h, seed) = (harness.clone(), plan.seed);
                restarts.push(tokio::spawn(async move {
                    let drawn = h.ballot_beside(seed).await;
                    *h.ballot.lock().expect("ballot") = Some(drawn);
                }));
            }
            Fault::CountsLie { for_ms } => {
                shared::queue::COUNTS_LIE.store(true, Ordering::SeqCst);
                let for_ms = *for_ms;
                restarts.push(tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(for_ms)).await;
                    shared::queue::COUNTS_LIE.store(false, Ordering::SeqCst);
                }));
            }
        }
    }
    for client in clients {
        client.await.map_err(|e| format!("a client panicked: {e}"))?;
    }
    for restart in restarts {
        let _ = restart.await;
    }
    harness.sqs_down.store(false, Ordering::SeqCst);
    shared::queue::COUNTS_LIE.store(false, Ordering::SeqCst);
    if consumer.lock().expect("consumer").is_none() {
        *consumer.lock().expect("consumer") = Some(spawn_consumer(&harness, stop_rx.clone()));
    }
    if let Some(killed) = killed_master {
        restore_master(killed).await?;
    }
    let rush_took = rush.elapsed();

    // Everything on its way reaches DynamoDB and the mail.
    let drained = harness.drain().await;
    let _ = stop_tx.send(true);
    let consumer = consumer.lock().expect("consumer").take();
    if let Some(consumer) = consumer {
        let _ = consumer.await;
    }
    let _ = reconciler.await;
    let checked = match drained {
        Ok(()) => harness.check().await,
        Err(e) => Err(e),
    };
    // The emulator slows as its state grows: each run's table and queues go with it.
    harness.remove().await;
    Ok(format!("{}; the rush {:.1} s", checked?, rush_took.as_secs_f64()))
}

/// How long each request to AWS is held back on the slow network: longer than a rebuild waits
/// for DynamoDB's index (1 s), so a join's durable write can land after a rebuild read the line.
const SLOW_NETWORK: Duration = Duration::from_millis(1_500);

fn spawn_consumer(harness: &Arc<Harness>, stop: tokio::sync::watch::Receiver<bool>) -> tokio::task::JoinHandle<()> {
    let poller = local_runner::esm::Poller::new(harness.sqs.clone(), &harness.queue_url, harness.healthy.mail.clone());
    tokio::spawn(poller.run(2, Default::default(), stop))
}

/// One user's client: grabs until answered; sold out, joins the waitlist (most do); holding a
/// confirmed order, cancels it (some do). A request unanswered within a timeout the seed draws is
/// left running and sent again, as a client that timed out does; a 503 or 429 is retried.
async fn client(h: &Harness, user: &str, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let deadline = Instant::now() + Duration::from_secs(90);
    let patience = || Duration::from_millis(5 + (seed % 60));
    let mut held = None;
    while Instant::now() < deadline {
        let reply = h.ask_impatiently(user, "grab", patience(), &mut rng).await;
        match (reply.0, reply.1["code"].as_str()) {
            (202 | 200, _) => {
                held = Some(());
                // Its order, asked for at once or a moment later: PENDING or CONFIRMED (or 503
                // while the cache is rebuilt), never NO_ORDER (recorded, and checked).
                if rng.random_bool(0.5) {
                    tokio::time::sleep(Duration::from_millis(rng.random_range(0..800))).await;
                    let _ = h.ask(user, "order").await;
                }
                break;
            }
            (409, Some("SOLD_OUT")) => {
                if rng.random_bool(0.7) {
                    join(h, user, &mut rng, deadline).await;
                }
                return;
            }
            (409, Some("ORDER_CANCELLED")) => return,
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    if held.is_some() && rng.random_bool(0.25) {
        // Cancel once the order is stored (PENDING is refused until then).
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..1_500))).await;
        while Instant::now() < deadline {
            let (status, body) = h.ask(user, "cancel").await;
            match (status, body["code"].as_str()) {
                (200, _) => return,
                (409, Some("ORDER_PENDING")) | (503, _) | (429, _) => {
                    tokio::time::sleep(Duration::from_millis(200)).await
                }
                _ => return,
            }
        }
    }
}

/// Joins the waitlist until answered: waiting, promoted at once, or told to grab (numbers came
/// back on sale: it grabs again).
async fn join(h: &Harness, user: &str, rng: &mut StdRng, deadline: Instant) {
    while Instant::now() < deadline {
        let (status, body) = h.ask(user, "join").await;
        match (status, body["code"].as_str()) {
            (200..=202, _) => return,
            (409, Some("NOT_SOLD_OUT")) => {
                let (status, _) = h.ask(user, "grab").await;
                if status == 202 || status == 200 {
                    return;
                }
            }
            (409, _) | (410, _) => return,
            _ => tokio::time::sleep(Duration::from_millis(150 + rng.random_range(0..100))).await,
        }
    }
}

impl Harness {
    async fn new(plan: &Plan, args: &Args) -> Result<Self, String> {
        let mut settings = LocalSettings::from_env().map_err(|e| e.to_string())?;
        // Every node of the stack's cluster: the client finds the cluster again from the others
        // when the one it first asked is the master killed.
        let ports = std::env::var("REDIS_CLUSTER_PORTS").unwrap_or_else(|_| "16381 16382 16383".into());
        settings.gate.redis_url =
            ports.split_whitespace().map(|p| format!("redis://127.0.0.1:{p}")).collect::<Vec<_>>().join(",");
        settings.gate.cluster = true;
        settings.reconcile.outbox_age = Duration::from_secs(2);
        // Reconcile runs every 0.7 s here (deployed: a minute), and looks at the whole cache each time.
        settings.reconcile.whole_every = Duration::ZERO;
        // A rebuild goes by the queue only where a bucket was lost with its sent record, which
        // no fault here does (a shard lost whole takes other buckets' records, never a bucket's
        // own): its wait is short, as another sale's backlog outlasts any wait.
        settings.rebuild.max_wait = Duration::from_secs(10);
        // A claim outlives the send it guards (docs/RELIABILITY.md): a slow send is never doubled.
        settings.mail = shared::config::MailSettings::timed(
            format!("campaign-{}@example.com", uuid::Uuid::now_v7().simple()),
            settings.mail.concurrency,
            Duration::from_millis(1_000),
            Duration::from_secs(8),
            Duration::from_secs(10),
        )
        .map_err(|e| e.to_string())?;
        settings.store.table_name = format!("campaign-{}", uuid::Uuid::now_v7().simple());
        let sdk = settings.sdk_config().await;
        let sqs = aws_sdk_sqs::Client::new(&sdk);
        // Redelivered 4 s after a receive; the fifth receive, at 16 s, is past the claim (10 s).
        let queue = format!("campaign-{}", uuid::Uuid::now_v7().simple());
        let (queue_url, dead_letters_url) =
            provision::ensure_queues_with(&sqs, &queue, 4).await.map_err(|e| e.to_string())?;
        provision::ensure_table(&aws_sdk_dynamodb::Client::new(&sdk), &settings.store.table_name)
            .await
            .map_err(|e| e.to_string())?;
        provision::ensure_sender(&aws_sdk_sesv2::Client::new(&sdk), &settings.mail.from)
            .await
            .map_err(|e| e.to_string())?;
        let healthy = Functions::build(&settings, &queue_url).await.map_err(|e| e.to_string())?;
        let mut unreachable = settings.clone();
        unreachable.aws_endpoint = "http://127.0.0.1:1".into();
        let cut_off = Functions::build(&unreachable, &queue_url).await.map_err(|e| e.to_string())?;
        let mut far = settings.clone();
        far.aws_endpoint = local_runner::network::slow_network(&settings.aws_endpoint, SLOW_NETWORK)
            .await
            .map_err(|e| e.to_string())?;
        let slow = Functions::build(&far, &queue_url).await.map_err(|e| e.to_string())?;

        let now = OffsetDateTime::now_utc();
        let event = shared::domain::Event {
            buckets: plan.buckets,
            waitlist_size: args.users as u32,
            cancel_until: now + time::Duration::minutes(30),
            ..bench::sales::open_event(
                EventId::parse(&format!("campaign-{}-{}", plan.seed, uuid::Uuid::now_v7().simple()))
                    .map_err(|e| e.to_string())?,
                "The fault campaign",
                args.tickets,
                now - time::Duration::minutes(1),
            )
        };
        healthy.store.put_event(&event).await.map_err(|e| e.to_string())?;
        healthy.gate.warm(&event).await.map_err(|e| e.to_string())?;
        let buckets = healthy.gate.buckets_of(&event);
        let fixture = |name: &str| -> Value {
            let path = format!("{}/../events/{name}", env!("CARGO_MANIFEST_DIR"));
            serde_json::from_str(&std::fs::read_to_string(path).expect("a fixture")).expect("JSON")
        };
        let template = HashMap::from([
            ("grab", fixture("grab.json")),
            ("cancel", fixture("cancel.json")),
            ("join", fixture("waitlist-join.json")),
            ("order", fixture("query-order.json")),
            ("waitlist", fixture("waitlist.json")),
            ("release", fixture("release-http.json")),
            ("entry", fixture("entry.json")),
            ("draw", fixture("release-draw.json")),
        ]);
        Ok(Self {
            settings,
            healthy,
            cut_off,
            slow,
            sqs,
            queue_url,
            dead_letters_url,
            sqs_down: AtomicBool::new(false),
            slow_joins: AtomicBool::new(false),
            event: event.id,
            template,
            told: Arc::default(),
            ballot: Mutex::default(),
            seed: plan.seed,
            buckets,
        })
    }

    /// A request of `kind` by `user`, as API Gateway hands it to the function.
    fn request(&self, user: &str, kind: &str) -> lambda_http::Request {
        let mut e = self.template[kind].clone();
        let id = e["pathParameters"]["id"].as_str().unwrap_or_default().to_owned();
        if let Some(path) = e["rawPath"].as_str() {
            e["rawPath"] = json!(path.replace(&id, self.event.as_str()));
        }
        e["pathParameters"]["id"] = json!(self.event);
        e["requestContext"]["authorizer"]["jwt"]["claims"] =
            json!({ "sub": user, "email": format!("{user}@example.com"), "email_verified": "true" });
        if matches!(kind, "grab" | "join") {
            let expires = epoch_ms(OffsetDateTime::now_utc() + time::Duration::minutes(10));
            let hash = self.settings.hash.keys.last().expect("the hash keys").current.issue(
                &self.event,
                &UserId::parse(user).expect("an id"),
                expires,
            );
            e["body"] = json!(json!({ "hash": hash }).to_string());
        }
        let event: ApiGatewayV2httpRequest = serde_json::from_value(e).expect("an HTTP API event");
        apigw::into_request(event)
    }

    /// Asks and waits for the answer; records what the user was told.
    async fn ask(&self, user: &str, kind: &str) -> (u16, Value) {
        let functions = if self.sqs_down.load(Ordering::SeqCst) {
            &self.cut_off
        } else if kind == "join" && self.slow_joins.load(Ordering::SeqCst) {
            &self.slow
        } else {
            &self.healthy
        };
        let function = if matches!(kind, "order") { Function::Query } else { Function::Grab };
        let reply = functions.call(function, self.request(user, kind)).await;
        let status = reply.status().as_u16();
        let body: Value = serde_json::from_slice(reply.body().as_ref()).unwrap_or(Value::Null);
        self.record(user, kind, status, &body);
        (status, body)
    }

    /// [`Self::ask`], but a client that stops waiting after `patience` (the request goes on, as a
    /// Lambda invocation does when its client gives up) and asks again; sometimes it waits.
    async fn ask_impatiently(&self, user: &str, kind: &str, patience: Duration, rng: &mut StdRng) -> (u16, Value) {
        if !rng.random_bool(0.15) {
            return self.ask(user, kind).await;
        }
        // The request runs on in the background; its answer is recorded when it comes.
        let request = self.request(user, kind);
        let functions = if self.sqs_down.load(Ordering::SeqCst) { self.cut_off.clone() } else { self.healthy.clone() };
        let told = self.told.clone();
        let (user_owned, kind_owned) = (user.to_owned(), kind.to_owned());
        let pending = tokio::spawn(async move {
            let reply = functions.call(Function::Grab, request).await;
            let status = reply.status().as_u16();
            let body: Value = serde_json::from_slice(reply.body().as_ref()).unwrap_or(Value::Null);
            record(&told, &user_owned, &kind_owned, status, &body);
            (status, body)
        });
        match tokio::time::timeout(patience, pending).await {
            Ok(Ok(answered)) => answered,
            _ => self.ask(user, kind).await,
        }
    }

    fn record(&self, user: &str, kind: &str, status: u16, body: &Value) {
        record(&self.told, user, kind, status, body);
    }
}

/// What a reply told its user, kept for the checks.
fn record(told: &Mutex<Told>, user: &str, kind: &str, status: u16, body: &Value) {
    let mut told = told.lock().expect("told");
    let code = body["code"].as_str().map(|c| format!(" {c}")).unwrap_or_default();
    *told.statuses.entry(format!("{kind} {status}{code}")).or_default() += 1;
    let order = body["order_id"].as_str();
    told.said.entry(user.to_owned()).or_default().push(format!("{kind} {status}{code} {}", order.unwrap_or("")));
    match (kind, status, order) {
        ("grab", 202 | 200, Some(order)) | ("join", 202, Some(order)) => {
            told.orders.entry(user.to_owned()).or_default().insert(order.to_owned());
        }
        ("join", 201 | 200, _) if body["status"] == "WAITING" => {
            told.waiting.insert(user.to_owned());
        }
        ("cancel", 200, _) => {
            told.cancelled.insert(user.to_owned());
        }
        _ => {}
    }
}

/// A master killed by a run: its port, and its replica's, promoted in its place.
struct Killed {
    port: u16,
}

impl Harness {
    /// A connection of the run's own, for the faults and the checks.
    async fn redis(&self) -> Result<shared::gate::Connection, String> {
        self.healthy.gate.connection().await.map_err(|e| e.to_string())
    }

    fn bucket(&self, index: u16) -> Result<keys::Bucket, String> {
        self.buckets.get(index).cloned().ok_or_else(|| format!("no bucket {index}"))
    }

    async fn lose_opening(&self, bucket: u16) -> Result<(), String> {
        let bucket = self.bucket(bucket)?;
        let mut r = self.redis().await?;
        // In cluster mode the field names the node: completed as the scripts complete it.
        let field: String = redis::Script::new("return ARGV[1] .. string.sub(redis.call('CLUSTER', 'MYID'), 1, 12)")
            .key(keys::meta(&bucket))
            .arg(keys::opening_prefix())
            .invoke_async(&mut r)
            .await
            .map_err(|e| e.to_string())?;
        let _: u32 = r.hdel(keys::meta(&bucket), &field).await.map_err(|e| e.to_string())?;
        Ok(())
    }

    /// The shard that serves `bucket` lost whole, as far as this event's keys tell: the bucket's
    /// keys, and every sent record of the event whose slot that master serves (a bucket's own
    /// record lies on another shard).
    async fn delete_keys(&self, bucket: u16) -> Result<(), String> {
        let bucket = self.bucket(bucket)?;
        let mut r = self.redis().await?;
        let slots: redis::Value =
            redis::cmd("CLUSTER").arg("SLOTS").query_async(&mut r).await.map_err(|e| e.to_string())?;
        // The master alone (a replica not listed, as while it syncs, is no matter here): a slot
        // whose master is not found takes no record with it. Before, a master looked for with its
        // replica was "none" for both the bucket and its own record while replicas were unlisted,
        // and "none == none" deleted the bucket's own record: a fault no real shard loss makes
        // (the record lies on another shard), which seed 197 of a long-running stack met.
        let master_of = |key: &str| serving_master(&slots, keys::slot(hash_tag(key)));
        let lost = master_of(&keys::meta(&bucket)).ok_or("no master serves the bucket's slot")?;
        let _: u32 = r.del(&keys::cache(&bucket)).await.map_err(|e| e.to_string())?;
        for record in self.buckets.iter().map(keys::sent).filter(|record| master_of(record) == Some(lost)) {
            let _: u32 = r.del(&record).await.map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// One key of a bucket lost by itself.
    async fn lose_key(&self, bucket: u16, key: LostKey) -> Result<(), String> {
        let bucket = self.bucket(bucket)?;
        let mut r = self.redis().await?;
        let _: u32 = r.del(key.key(&bucket)).await.map_err(|e| e.to_string())?;
        Ok(())
    }

    /// A request to `function` for `event` as `user` (an organiser when `admin`), with `body`.
    fn call_as(&self, kind: &str, event: &str, user: &str, admin: bool, body: Option<&Value>) -> lambda_http::Request {
        let mut e = self.template[kind].clone();
        let id = e["pathParameters"]["id"].as_str().unwrap_or_default().to_owned();
        if let Some(path) = e["rawPath"].as_str()
            && !id.is_empty()
        {
            e["rawPath"] = json!(path.replace(&id, event));
        }
        if !id.is_empty() {
            e["pathParameters"]["id"] = json!(event);
        }
        let mut claims = json!({ "sub": user, "email": format!("{user}@example.com"), "email_verified": "true" });
        if admin {
            claims["cognito:groups"] = json!("[admin]");
        }
        e["requestContext"]["authorizer"]["jwt"]["claims"] = claims;
        if let Some(body) = body {
            e["body"] = json!(body.to_string());
        }
        apigw::into_request(serde_json::from_value(e).expect("an HTTP API event"))
    }

    async fn reply(&self, function: Function, request: lambda_http::Request) -> (u16, Value) {
        let reply = self.healthy.call(function, request).await;
        (reply.status().as_u16(), serde_json::from_slice(reply.body().as_ref()).unwrap_or(Value::Null))
    }

    /// A ballot of its own beside the sale (560 tickets, 200 waiting places, 800 entrants): drawn,
    /// and while its draw is laid down (more winners than one chunk: the first chunk's orders are
    /// stored before the waiting places are laid), winners whose orders are stored give their
    /// tickets back: refused (`DRAW_UNDER_WAY`) until the draw is done, then each number goes to
    /// the first who waits; none is ever on sale, and the ballot's audit passes.
    async fn ballot_beside(&self, seed: u64) -> Result<String, String> {
        use futures::StreamExt;
        use shared::domain::{beacon::LocalChain, draw};
        let chain = LocalChain::development();
        let secret: [u8; 32] = StdRng::seed_from_u64(seed ^ 0xba11).random();
        let id = format!("campaign-ballot-{seed}-{}", uuid::Uuid::now_v7().simple());
        // Its 800 entries in before registration closes, on a machine loaded by the rush and a
        // backlog or two beside it (8 s was not always enough: seed 56 met a close).
        let draw_from = OffsetDateTime::now_utc() + time::Duration::seconds(20);
        let rfc = |t: OffsetDateTime| shared::domain::event::rfc3339(t);
        let body = json!({
            "id": id, "title": "A ballot beside the sale", "capacity": 560, "waitlist_size": 200,
            "sale_mode": "ballot", "draw_commitment": draw::commitment(&secret),
            "sale_start": rfc(draw_from), "sale_end": rfc(draw_from + time::Duration::hours(1)),
            "draw_beacon": { "public_key": chain.public_key() },
        });
        let (status, released) =
            self.reply(Function::Release, self.call_as("release", &id, "organiser", true, Some(&body))).await;
        if status != 201 {
            return Err(format!("the ballot's release: {status} {released}"));
        }
        let round = released["draw"]["beacon"]["round"].as_u64().ok_or("the ballot's round")?;
        let entered: Vec<u16> = futures::stream::iter(0..800)
            .map(|i| {
                let id = &id;
                async move {
                    self.reply(Function::Grab, self.call_as("entry", id, &format!("b{seed}-{i}"), false, None)).await.0
                }
            })
            .buffer_unordered(32)
            .collect()
            .await;
        if let Some(status) = entered.iter().find(|s| !matches!(s, 200 | 201)) {
            return Err(format!("an entry was answered {status}"));
        }
        tokio::time::sleep_until((Instant::now() + (draw_from - OffsetDateTime::now_utc()).unsigned_abs()).into())
            .await;
        let reveal =
            json!({ "secret": shared::domain::hex::encode(&secret), "beacon_signature": chain.round(round).signature });
        let event = EventId::parse(&id).map_err(|e| e.to_string())?;
        let done = AtomicBool::new(false);
        let drawing = async {
            let deadline = Instant::now() + Duration::from_secs(120);
            let outcome = loop {
                let (status, body) =
                    self.reply(Function::Release, self.call_as("draw", &id, "organiser", true, Some(&reveal))).await;
                match status {
                    200 => break Ok(()),
                    202 | 503 if Instant::now() < deadline => continue,
                    _ => break Err(format!("the draw: {status} {body}")),
                }
            };
            done.store(true, Ordering::SeqCst);
            outcome
        };
        // Winners give back as soon as their orders are stored, the draw still laying places.
        let giving_back = async {
            let (mut refused, mut given) = (0u32, HashSet::new());
            let deadline = Instant::now() + Duration::from_secs(150);
            while Instant::now() < deadline && given.len() < 6 {
                let holders: Vec<String> = match self.redis().await {
                    Ok(mut r) => r
                        .hgetall::<_, HashMap<String, String>>(keys::meta(&event))
                        .await
                        .map(|m| {
                            m.into_iter()
                                .filter(|(f, v)| f.starts_with('=') && !v.starts_with(['#', '!']))
                                .map(|(f, _)| f[1..].to_owned())
                                .collect()
                        })
                        .unwrap_or_default(),
                    Err(_) => Vec::new(),
                };
                let wanted = 6 - given.len();
                let fresh: Vec<String> = holders.into_iter().filter(|u| !given.contains(u)).take(wanted).collect();
                for user in fresh {
                    let drawn_before = done.load(Ordering::SeqCst);
                    let (status, body) =
                        self.reply(Function::Grab, self.call_as("cancel", &id, &user, false, None)).await;
                    match (status, body["code"].as_str()) {
                        (200, _) => _ = given.insert(user),
                        (409, Some("DRAW_UNDER_WAY")) if drawn_before => {
                            return Err(format!("{user} was told DRAW_UNDER_WAY after the draw was done"));
                        }
                        (409, Some("DRAW_UNDER_WAY")) => refused += 1,
                        (409, Some("ORDER_PENDING")) | (503, _) | (429, _) => {}
                        other => return Err(format!("{user}'s give-back: {other:?} {body}")),
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Ok::<_, String>((refused, given))
        };
        let (drawn, given) = tokio::join!(drawing, giving_back);
        drawn?;
        let (refused, given) = given?;
        // Every number the winners gave back reached the first who waited: none on sale.
        let mut r = self.redis().await?;
        let seats: Vec<u32> = r.lrange(keys::seats(&event), 0, -1).await.map_err(|e| e.to_string())?;
        if !seats.is_empty() {
            return Err(format!("a ballot's numbers on sale: {seats:?}"));
        }
        // The ballot's audit, once its orders are stored and mailed (the consumer runs beside).
        let deadline = Instant::now() + Duration::from_secs(60);
        let audit = loop {
            let mut report = self.template_report();
            report["pathParameters"]["id"] = json!(id);
            report["rawPath"] = json!(format!("/admin/events/{id}/report"));
            let request = apigw::into_request(serde_json::from_value(report).map_err(|e| e.to_string())?);
            let (_, audit) = self.reply(Function::Query, request).await;
            if (audit["passed"] == true && audit["promoted"].as_u64() == Some(given.len() as u64))
                || Instant::now() > deadline
            {
                break audit;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        if audit["passed"] != true || audit["promoted"].as_u64() != Some(given.len() as u64) {
            return Err(format!(
                "the ballot's audit: {} promoted for {} given back; {}",
                audit["promoted"],
                given.len(),
                audit["checks"]
            ));
        }
        Ok(format!("{} winners gave back, {refused} times refused while the draw was laid down", given.len()))
    }

    /// Another sale on the shared queue: an event of its own in this run's table, and `messages`
    /// of its orders, sealed as grab seals them, sent at once (they are stored as any late order is).
    async fn another_sales_backlog(&self, messages: u32) -> Result<(), String> {
        use futures::StreamExt;
        let other = bench::sales::open_event(
            EventId::parse(&format!("backlog-{}", uuid::Uuid::now_v7().simple())).map_err(|e| e.to_string())?,
            "Another sale",
            messages,
            OffsetDateTime::now_utc() - time::Duration::minutes(1),
        );
        self.healthy.store.put_event(&other).await.map_err(|e| e.to_string())?;
        self.healthy.gate.warm(&other).await.map_err(|e| e.to_string())?;
        let seal = self.settings.seal_keys();
        let created = shared::domain::event::rfc3339(OffsetDateTime::now_utc());
        let sent = futures::stream::iter(1..=messages)
            .map(|n| {
                let (queue, seal, other, created) = (&self.healthy.queue, &seal, &other.id, &created);
                async move {
                    let user = UserId::parse(&format!("other-{n}")).map_err(|e| e.to_string())?;
                    let email =
                        shared::domain::Email::parse(&format!("other-{n}@example.com")).map_err(|e| e.to_string())?;
                    let head = shared::domain::order::MessageHead::new(
                        &shared::domain::OrderId::generate(),
                        other,
                        &user,
                        &email,
                        created,
                    );
                    queue
                        .send_sealed(&head.complete(shared::domain::TicketNo::new(n)), seal)
                        .await
                        .map_err(|e| e.to_string())
                }
            })
            .buffer_unordered(32)
            .collect::<Vec<_>>()
            .await;
        sent.into_iter().collect::<Result<Vec<_>, _>>()?;
        Ok(())
    }

    /// Kills the master that serves `bucket` (SIGKILL: nothing saved) and promotes its replica.
    async fn kill_master(&self, bucket: u16) -> Result<Killed, String> {
        let bucket = self.bucket(bucket)?;
        let mut r = self.redis().await?;
        let slot = keys::slot(&bucket.to_string());
        // A stack just started lists its replicas once they have attached: waited for, a while.
        let deadline = Instant::now() + Duration::from_secs(30);
        let (master, replica) = loop {
            let slots: redis::Value =
                redis::cmd("CLUSTER").arg("SLOTS").query_async(&mut r).await.map_err(|e| e.to_string())?;
            match serving(&slots, slot) {
                Some(pair) => break pair,
                None if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(500)).await,
                None => return Err("no master with a replica serves the bucket's slot".into()),
            }
        };
        // scripts/stack keeps each node's pid in its state directory.
        let state = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(".local");
        let pid_file = state.join(format!("cluster-{master}.pid")).display().to_string();
        let pid = std::fs::read_to_string(&pid_file).map_err(|e| format!("{pid_file}: {e}"))?;
        let killed = std::process::Command::new("kill").args(["-9", pid.trim()]).status().map_err(|e| e.to_string())?;
        if !killed.success() {
            return Err(format!("could not kill the master on {master}"));
        }
        let mut promoted = node(replica).await?;
        let _: () = redis::cmd("CLUSTER")
            .arg("FAILOVER")
            .arg("TAKEOVER")
            .query_async(&mut promoted)
            .await
            .map_err(|e| e.to_string())?;
        wait_for(Duration::from_secs(20), || async {
            let mut n = node(replica).await.ok()?;
            let info: String = redis::cmd("INFO").arg("replication").query_async(&mut n).await.ok()?;
            info.contains("role:master").then_some(())
        })
        .await
        .ok_or(format!("the replica on {replica} did not take over"))?;
        Ok(Killed { port: master })
    }

    /// A cancellation stored (its give-back marker written, Redis not yet told), then the
    /// give-back its request runs and reconcile's, at once.
    async fn give_back_race(&self) -> Result<(), String> {
        let holders: Vec<String> = self.told.lock().expect("told").orders.keys().cloned().collect();
        let store = &self.healthy.store;
        for user in holders {
            let user_id = UserId::parse(&user).map_err(|e| e.to_string())?;
            let Ok(Some(view)) = store.get_order(&self.event, &user_id).await else { continue };
            if view.status != OrderStatus::Confirmed {
                continue;
            }
            let now = OffsetDateTime::now_utc();
            let shared::store::cancellations::Cancellation::Cancelled(view) =
                store.cancel_order(&self.event, &user_id, &view, now).await.map_err(|e| e.to_string())?
            else {
                continue;
            };
            self.told.lock().expect("told").cancelled.insert(user.clone());
            let due = shared::store::cancellations::GiveBackDue {
                user: user_id,
                order_id: view.order_id,
                ticket_no: view.ticket_no,
                cancelled_at: now,
            };
            let h = &self.healthy;
            let courier = shared::delivery::Courier::new(h.gate.clone(), h.queue.clone(), self.settings.seal_keys());
            let returns = shared::give_back::GiveBacks::new(h.gate.clone(), store.clone(), courier);
            let (given, _) = tokio::join!(returns.give_back(&self.event, &due), h.reconcile.run());
            given.map_err(|e| e.to_string())?;
            return Ok(());
        }
        Ok(())
    }

    /// The consumer and reconcile until nothing is on its way: the queue empty, no outbox entry,
    /// no give-back marker, no move under way (bounded).
    async fn drain(&self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(150);
        let poller = local_runner::esm::Poller::new(self.sqs.clone(), &self.queue_url, self.healthy.mail.clone());
        loop {
            if Instant::now() > deadline {
                return Err("the sale did not drain within 150 s".into());
            }
            while poller.poll_once().await.unwrap_or(1) > 0 && Instant::now() < deadline {}
            let report = self.healthy.reconcile.run().await;
            let h = &self.healthy;
            let outbox = h.gate.outbox_len(&self.event).await.unwrap_or(u64::MAX);
            let queued = h.queue.in_flight().await.unwrap_or(u64::MAX);
            let markers = h.store.give_backs_due(&self.event).await.map(|d| d.len()).unwrap_or(usize::MAX);
            let cached = h.gate.stock(&self.event).await.ok().flatten().is_some();
            if outbox == 0 && queued == 0 && markers == 0 && cached && report.moves_finished == 0 {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    /// Every promise, counted from DynamoDB, Redis and the sent mail.
    async fn check(&self) -> Result<String, String> {
        let h = &self.healthy;
        let rows = h.store.all_orders(&self.event).await.map_err(|e| e.to_string())?;
        let told = std::mem::take(&mut *self.told.lock().expect("told"));
        let mut broken = Vec::new();
        let by_user: HashMap<&str, &shared::store::AttendeeRow> =
            rows.iter().map(|r| (r.user_id.as_str(), r)).collect();

        let mut held: HashMap<u32, u32> = HashMap::new();
        for r in rows.iter().filter(|r| r.status == OrderStatus::Confirmed) {
            *held.entry(r.ticket_no.get()).or_default() += 1;
        }
        let twice: Vec<u32> = held.iter().filter(|(_, n)| **n > 1).map(|(t, _)| *t).collect();
        if !twice.is_empty() {
            broken.push(format!("numbers held twice: {twice:?}"));
        }
        for (user, orders) in &told.orders {
            if orders.len() != 1 {
                broken.push(format!("{user} was told of {} orders: {orders:?}", orders.len()));
            }
            let stored = by_user.get(user.as_str());
            let kept = stored.is_some_and(|r| {
                orders.contains(r.order_id.as_str())
                    && (r.status == OrderStatus::Confirmed
                        || (r.status == OrderStatus::Cancelled && told.cancelled.contains(user)))
            });
            if !kept {
                broken.push(format!(
                    "{user} was told {orders:?}, stored {:?} (its replies: {:?})",
                    stored.map(|r| (r.order_id.as_str(), r.ticket_no.get(), r.status)),
                    told.said.get(user.as_str())
                ));
            }
        }

        // One mail per confirmed order; a cancelled one has the mail it had (none, if it was
        // cancelled before its mail went out: a pass for a cancelled ticket is no use); no mail
        // for any other order, and none twice.
        let mut mails: HashMap<String, u32> = HashMap::new();
        let sent = local_runner::mailbox::sent(&self.settings.aws_endpoint).await?;
        // Another sale's orders (the backlog, the ballot beside) are mailed too, to their own
        // users: only this sale's users' mail is counted.
        let ours = format!("c{}-", self.seed);
        for m in
            sent.iter().filter(|m| m.source == self.settings.mail.from && m.to.iter().any(|to| to.starts_with(&ours)))
        {
            let order = m.body_text.lines().find_map(|l| l.split("Order id: ").nth(1)).map(|o| o.trim().to_owned());
            *mails.entry(order.unwrap_or_else(|| format!("(no order id: {})", m.subject))).or_default() += 1;
        }
        let may_have_mail: HashSet<&str> = rows
            .iter()
            .filter(|r| matches!(r.status, OrderStatus::Confirmed | OrderStatus::Cancelled))
            .map(|r| r.order_id.as_str())
            .collect();
        for (order, n) in &mails {
            if *n != 1 || !may_have_mail.contains(order.as_str()) {
                broken.push(format!("{n} mails for {order}"));
            }
        }
        let unmailed: Vec<String> = rows
            .iter()
            .filter(|r| r.status == OrderStatus::Confirmed && !mails.contains_key(r.order_id.as_str()))
            .map(|r| format!("{} ({}, {:?}, mail {:?})", r.order_id, r.user_id, r.status, r.mail_status))
            .collect();
        if !unmailed.is_empty() {
            broken.push(format!("{} confirmed orders without their mail: {unmailed:?}", unmailed.len()));
        }

        // Every user told they wait still waits, or holds an order.
        let mut still_waiting = 0;
        for user in &told.waiting {
            if by_user.contains_key(user.as_str()) {
                continue;
            }
            let (status, body) = self.ask(user, "waitlist").await;
            if status == 200 && body["status"] == "WAITING" {
                still_waiting += 1;
            } else {
                broken.push(format!("{user} was told they wait, and now: {status} {body}"));
            }
        }
        let on_sale = h.gate.stock(&self.event).await.map_err(|e| e.to_string())?.unwrap_or(0);
        if on_sale > 0 && still_waiting > 0 {
            broken.push(format!("{on_sale} numbers on sale while {still_waiting} users wait"));
        }

        let dead: u64 = self
            .sqs
            .get_queue_attributes()
            .queue_url(&self.dead_letters_url)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
            .send()
            .await
            .map_err(|e| format!("the DLQ: {e}"))?
            .attributes()
            .and_then(|a| a.get(&aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages))
            .and_then(|n| n.parse().ok())
            .unwrap_or(u64::MAX);
        if dead != 0 {
            broken.push(format!("{dead} messages in the DLQ"));
        }

        let mut report = self.template_report();
        report["pathParameters"]["id"] = json!(self.event);
        report["rawPath"] = json!(format!("/admin/events/{}/report", self.event));
        let event: ApiGatewayV2httpRequest = serde_json::from_value(report).map_err(|e| e.to_string())?;
        let audit = h.call(Function::Query, apigw::into_request(event)).await;
        let audit: Value = serde_json::from_slice(audit.body().as_ref()).unwrap_or(Value::Null);
        if audit["passed"] != true {
            let failed: Vec<&Value> = audit["checks"]
                .as_array()
                .map(|c| c.iter().filter(|c| c["passed"] != true).collect())
                .unwrap_or_default();
            broken.push(format!("the audit failed: {failed:?}"));
        }

        let ballot = match self.ballot.lock().expect("ballot").take() {
            Some(Ok(drawn)) => format!("; the ballot beside: {drawn}"),
            Some(Err(e)) => {
                broken.push(format!("the ballot beside: {e}"));
                String::new()
            }
            None => String::new(),
        };

        // A holder who cancels, or asks for their order, is never told they hold nothing (a cache
        // being rebuilt is a 503).
        for (reply, n) in
            told.statuses.iter().filter(|(k, _)| k.starts_with("cancel 404") || k.starts_with("order 404"))
        {
            broken.push(format!("{n} x {reply} to users told of an order"));
        }

        let count = |s: OrderStatus| rows.iter().filter(|r| r.status == s).count();
        let summary = format!(
            "{} confirmed, {} cancelled, {} rejected, {} promoted, {still_waiting} waiting; replies {:?}{ballot}",
            count(OrderStatus::Confirmed),
            count(OrderStatus::Cancelled),
            count(OrderStatus::Rejected),
            rows.iter().filter(|r| r.promoted).count(),
            told.statuses
        );
        if broken.is_empty() { Ok(summary) } else { Err(format!("{}; {summary}", broken.join("; "))) }
    }

    /// Deletes the run's table, queues and sender (best effort).
    async fn remove(&self) {
        let sdk = self.settings.sdk_config().await;
        let _ =
            aws_sdk_dynamodb::Client::new(&sdk).delete_table().table_name(&self.settings.store.table_name).send().await;
        for url in [&self.queue_url, &self.dead_letters_url] {
            let _ = self.sqs.delete_queue().queue_url(url).send().await;
        }
        let ses = aws_sdk_sesv2::Client::new(&sdk);
        let _ = ses.delete_email_identity().email_identity(&self.settings.mail.from).send().await;
    }

    fn template_report(&self) -> Value {
        let path = format!("{}/../events/report.json", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(path).expect("the report fixture")).expect("JSON")
    }
}

/// A key's hash tag (what its slot is computed from): between its first `{` and the `}` after it.
fn hash_tag(key: &str) -> &str {
    key.split_once('{').and_then(|(_, rest)| rest.split_once('}')).map_or(key, |(tag, _)| tag)
}

/// The master serving `slot`, from `CLUSTER SLOTS`.
fn serving_master(slots: &redis::Value, slot: u16) -> Option<u16> {
    let redis::Value::Array(ranges) = slots else { return None };
    ranges.iter().find_map(|r| {
        let redis::Value::Array(r) = r else { return None };
        let (redis::Value::Int(from), redis::Value::Int(to)) = (r.first()?, r.get(1)?) else { return None };
        let redis::Value::Array(master) = r.get(2)? else { return None };
        let redis::Value::Int(port) = master.get(1)? else { return None };
        (*from..=*to).contains(&i64::from(slot)).then_some(*port as u16)
    })
}

/// The master and a replica serving `slot`, from `CLUSTER SLOTS`.
fn serving(slots: &redis::Value, slot: u16) -> Option<(u16, u16)> {
    let redis::Value::Array(ranges) = slots else { return None };
    let int = |v: &redis::Value| match v {
        redis::Value::Int(i) => Some(*i),
        _ => None,
    };
    let port = |v: &redis::Value| match v {
        redis::Value::Array(node) => node.get(1).and_then(int).map(|p| p as u16),
        _ => None,
    };
    ranges.iter().find_map(|r| {
        let redis::Value::Array(r) = r else { return None };
        let (from, to) = (int(r.first()?)?, int(r.get(1)?)?);
        ((from..=to).contains(&i64::from(slot))).then(|| Some((port(r.get(2)?)?, port(r.get(3)?)?))).flatten()
    })
}

/// A connection straight to one node of the stack's cluster.
async fn node(port: u16) -> Result<redis::aio::MultiplexedConnection, String> {
    let settings = LocalSettings::from_env().map_err(|e| e.to_string())?;
    let info = shared::gate::with_token(&format!("redis://127.0.0.1:{port}"), settings.gate.auth_token.as_deref())
        .map_err(|e| e.to_string())?;
    let client = redis::Client::open(info).map_err(|e| e.to_string())?;
    client.get_multiplexed_async_connection().await.map_err(|e| e.to_string())
}

/// Polls `probe` until it gives something, up to `limit`.
async fn wait_for<T, F, Fut>(limit: Duration, mut probe: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(found) = probe().await {
            return Some(found);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// The master killed comes back (`scripts/stack node-up`) as a replica of the one promoted, syncs,
/// and is made master again, so the next run meets the stack as it was.
async fn restore_master(killed: Killed) -> Result<(), String> {
    let stack = format!("{}/../scripts/stack", env!("CARGO_MANIFEST_DIR"));
    let up = std::process::Command::new(&stack)
        .args(["node-up", &killed.port.to_string()])
        .status()
        .map_err(|e| format!("{stack}: {e}"))?;
    if !up.success() {
        return Err(format!("the node on {} did not start again", killed.port));
    }
    let port = killed.port;
    wait_for(Duration::from_secs(60), || async move {
        let mut n = node(port).await.ok()?;
        let info: String = redis::cmd("INFO").arg("replication").query_async(&mut n).await.ok()?;
        (info.contains("role:slave") && info.contains("master_link_status:up")).then_some(())
    })
    .await
    .ok_or(format!("the node on {port} did not sync as a replica"))?;
    // A manual failover that its master does not complete within Redis's own 5 s is dropped
    // silently (a loaded machine, a replica still catching up): asked again, then forced, then
    // taken over without the masters' vote (an election can fail too on a loaded machine; the two
    // hold the same data by now: the node synced above and the run's traffic has stopped).
    for how in [None, Some("FORCE"), Some("TAKEOVER")] {
        let mut n = node(port).await?;
        let mut failover = redis::cmd("CLUSTER");
        failover.arg("FAILOVER");
        if let Some(how) = how {
            failover.arg(how);
        }
        let _: () = failover.query_async(&mut n).await.map_err(|e| e.to_string())?;
        let master = wait_for(Duration::from_secs(10), || async move {
            let mut n = node(port).await.ok()?;
            let info: String = redis::cmd("INFO").arg("replication").query_async(&mut n).await.ok()?;
            let cluster: String = redis::cmd("CLUSTER").arg("INFO").query_async(&mut n).await.ok()?;
            (info.contains("role:master") && cluster.contains("cluster_state:ok")).then_some(())
        })
        .await;
        if master.is_some() {
            return Ok(());
        }
    }
    Err(format!("the node on {port} did not become master again"))
}
