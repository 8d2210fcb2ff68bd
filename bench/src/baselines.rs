//! baselines: the seeds' grab designs beside ours, with the same users, stock and client
//! concurrency, in one run, rounds alternating so machine noise hits every design alike.
//!
//! - `pessimistic`: the red-packet seed's row lock: `SELECT stock ... FOR UPDATE`, `UPDATE`, insert
//!   the grab, in one MariaDB transaction;
//! - `optimistic`: the same seed's version check, retried a bounded number of times (it undersells
//!   under contention: the sold count is printed beside its time);
//! - `lecture-lock`: the lecture service's design: a per-event Redis lock (`SET NX PX`, released by
//!   compare-and-delete) around check-stock (a Redis counter, reloaded from the database when
//!   missing), check-order (a Redis set, then the database) and the database transaction;
//! - `ours`: the product's grab decision, in-process (the API Gateway event parsed as Lambda's
//!   runtime would, claims, verify hash, the grab script; every win durable in the outbox), the
//!   SQS send left out: it is the queue's cost, timed apart (the split at the end);
//! - `ours-stub`: the whole handler, its `SendMessage` answered by a stub on loopback (the SDK's
//!   own work and a loopback round trip stay in, the emulator's cost does not);
//! - `ours-sqs`: the whole handler with the real `SendMessage` to MiniStack.
//!
//! Every design is checked after each round: sold <= stock, stock + sold = the initial stock, no
//! user with two grabs; ours also counts its outbox and its sends.
//!
//! `scripts/bench` starts MariaDB, Redis and MiniStack and runs this in release.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use bench::sales::Sale;
use clap::{Parser, ValueEnum};
use futures::StreamExt;
use mysql_async::{Pool, TxOpts, prelude::*};
use redis::AsyncCommands;
use serde_json::{Value, json};
use shared::{
    domain::{EventDraft, EventId, OrderId, event::rfc3339, order::MessageHead},
    gate::{GrabAttempt, GrabOutcome, keys},
    handlers::grab::Grab,
    http::{Caller, apigw},
    queue::OrderQueue,
};
use time::OffsetDateTime;

#[derive(Parser, Clone)]
struct Args {
    #[arg(long, default_value_t = 30_000)]
    users: u32,
    #[arg(long, default_value_t = 20_000)]
    tickets: u32,
    /// Requests in flight at once, for every design.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    #[arg(long, env = "BENCH_MYSQL_URL", default_value = "mysql://root@127.0.0.1:13306/bench")]
    mysql_url: String,
    /// Attempts of the optimistic design before a user is told it failed.
    #[arg(long, default_value_t = 3)]
    optimistic_attempts: u32,
    /// Designs to run (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    only: Vec<Design>,
    /// Write the medians as JSON here too.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
enum Design {
    Pessimistic,
    Optimistic,
    LectureLock,
    Ours,
    OursStub,
    OursSqs,
}

impl Design {
    const ALL: [Design; 6] =
        [Self::Pessimistic, Self::Optimistic, Self::LectureLock, Self::Ours, Self::OursStub, Self::OursSqs];

    fn name(self) -> &'static str {
        match self {
            Self::Pessimistic => "pessimistic row lock (MariaDB)",
            Self::Optimistic => "optimistic version (MariaDB)",
            Self::LectureLock => "lecture: Redis lock + MariaDB",
            Self::Ours => "ours: grab decision (send apart)",
            Self::OursStub => "ours: grab handler + SQS stub",
            Self::OursSqs => "ours: grab handler + MiniStack SQS",
        }
    }
}

/// What one user was told.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Told {
    Won,
    SoldOut,
    /// The optimistic design gave up after its attempts.
    GaveUp,
}

struct Round {
    seconds: f64,
    won: u64,
    gave_up: u64,
    checks: Result<(), String>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let designs: Vec<Design> = if args.only.is_empty() { Design::ALL.to_vec() } else { args.only.clone() };
    let ctx = Context::new(&args).await?;
    println!(
        "baselines: {} users, {} tickets, {} in flight, {} rounds per design (alternating order)",
        args.users, args.tickets, args.concurrency, args.rounds
    );
    let mut rounds: HashMap<Design, Vec<Round>> = HashMap::new();
    for round in 0..args.rounds {
        let mut order = designs.clone();
        let turn = round % order.len();
        order.rotate_left(turn);
        for design in order {
            let r = ctx.round(design, round).await?;
            println!(
                "  round {round} {:<36} {:>8.2} s  won {:>6}{}  {}",
                design.name(),
                r.seconds,
                r.won,
                if r.gave_up > 0 { format!(" gave up {}", r.gave_up) } else { String::new() },
                match &r.checks {
                    Ok(()) => "checks pass".to_owned(),
                    Err(e) => format!("CHECK FAILED: {e}"),
                }
            );
            rounds.entry(design).or_default().push(r);
        }
    }

    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let pessimistic = rounds.get(&Design::Pessimistic).map(|r| median(&mut r.iter().map(|r| r.seconds).collect()));
    println!();
    println!(
        "{:<38} {:>10} {:>10} {:>10} {:>8} {:>14}  checks",
        "design", "median s", "spread s", "users/s", "sold", "vs pessimistic"
    );
    let mut summary = Vec::new();
    let mut failed = false;
    for design in &designs {
        let Some(rs) = rounds.get(design) else { continue };
        let mut secs: Vec<f64> = rs.iter().map(|r| r.seconds).collect();
        let (lo, hi) = (secs.iter().copied().fold(f64::MAX, f64::min), secs.iter().copied().fold(0.0, f64::max));
        let med = median(&mut secs);
        let mut sold: Vec<f64> = rs.iter().map(|r| r.won as f64).collect();
        let sold = median(&mut sold);
        let ok = rs.iter().all(|r| r.checks.is_ok());
        failed |= !ok;
        let ratio = pessimistic.map(|p| p / med);
        println!(
            "{:<38} {:>10.2} {:>10.2} {:>10.0} {:>8.0} {:>13}x  {}",
            design.name(),
            med,
            hi - lo,
            f64::from(args.users) / med,
            sold,
            ratio.map_or("-".into(), |r| format!("{r:.1}")),
            if ok { "no oversell, no duplicate" } else { "FAILED" }
        );
        summary.push(json!({
            "design": design, "median_seconds": med, "min_seconds": lo, "max_seconds": hi,
            "users_per_second": f64::from(args.users) / med, "sold_median": sold,
            "speedup_vs_pessimistic": ratio, "checks_pass": ok,
        }));
    }
    let split = ctx.split(2_000).await?;
    if let Some(path) = &args.json {
        let report = json!({
            "users": args.users, "tickets": args.tickets, "concurrency": args.concurrency,
            "rounds": args.rounds, "designs": summary, "grab_split_us": split,
        });
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
    }
    if failed {
        return Err("a design oversold or gave a user two grabs".into());
    }
    Ok(())
}

struct Context {
    args: Args,
    db: Pool,
    redis: shared::gate::Connection,
    real: local_runner::Functions,
    stub_grab: Grab,
    sqs_grab: Grab,
    stub_queue: OrderQueue,
    sdk: aws_config::SdkConfig,
    settings: local_runner::LocalSettings,
    stub_sends: Arc<AtomicU64>,
    sqs: aws_sdk_sqs::Client,
    bench_queue: String,
}

impl Context {
    async fn new(args: &Args) -> Result<Self, Box<dyn std::error::Error>> {
        let db =
            Pool::new(mysql_async::OptsBuilder::from_opts(mysql_async::Opts::from_url(&args.mysql_url)?).pool_opts(
                mysql_async::PoolOpts::default().with_constraints(
                    mysql_async::PoolConstraints::new(1, args.concurrency.max(1)).ok_or("pool size")?,
                ),
            ));
        db.get_conn().await?.query_drop("SELECT 1").await?;

        let settings = local_runner::LocalSettings::from_env()?;
        let sdk = settings.sdk_config().await;
        let provisioned =
            local_runner::provision::all(&sdk, &settings.store.table_name, &settings.queue_name, &settings.mail.from)
                .await?;
        let sqs = aws_sdk_sqs::Client::new(&sdk);
        let (bench_queue, _) = local_runner::provision::ensure_queues(&sqs, "ticketgrab-bench-orders").await?;
        let real = local_runner::Functions::build(&settings, &provisioned.queue_url).await?;

        let stub_sends = Arc::new(AtomicU64::new(0));
        let stub = stub_sqs(stub_sends.clone()).await?;
        let mut stub_settings = settings.clone();
        stub_settings.aws_endpoint = stub;
        let stub_sdk = stub_settings.sdk_config().await;
        let grab_with = |queue: OrderQueue| {
            Grab::new(
                real.gate.clone(),
                queue,
                settings.seal_keys(),
                real.store.clone(),
                settings.hash.clone(),
                // The seeds have no rate limit; every user grabs once here, so it never bites.
                settings.policy,
                settings.rebuild,
                settings.user_limits.clone(),
            )
        };
        let stub_queue = grab_queue(&stub_sdk, bench_queue.clone());
        let stub_grab = grab_with(stub_queue.clone());
        let sqs_grab = grab_with(grab_queue(&sdk, bench_queue.clone()));
        let redis = real.gate.connection().await?;
        Ok(Self {
            args: args.clone(),
            db,
            redis,
            real,
            stub_grab,
            sqs_grab,
            stub_queue,
            sdk,
            settings: settings.clone(),
            stub_sends,
            sqs,
            bench_queue,
        })
    }

    async fn round(&self, design: Design, round: usize) -> Result<Round, Box<dyn std::error::Error>> {
        match design {
            Design::Pessimistic | Design::Optimistic => self.database_round(design, round).await,
            Design::LectureLock => self.lecture_round(round).await,
            Design::Ours | Design::OursStub | Design::OursSqs => self.our_round(design, round).await,
        }
    }

    /// Runs `grab` for every user, `concurrency` at once; the time from the first to the last answer.
    async fn users<F, Fut>(&self, grab: F) -> Result<(f64, Vec<Told>), Box<dyn std::error::Error>>
    where
        F: Fn(u32) -> Fut,
        Fut: std::future::Future<Output = Result<Told, Box<dyn std::error::Error>>>,
    {
        let started = Instant::now();
        let told: Vec<Result<Told, _>> =
            futures::stream::iter(0..self.args.users).map(grab).buffer_unordered(self.args.concurrency).collect().await;
        let seconds = started.elapsed().as_secs_f64();
        let told = told.into_iter().collect::<Result<Vec<_>, _>>()?;
        Ok((seconds, told))
    }

    async fn database_round(&self, design: Design, round: usize) -> Result<Round, Box<dyn std::error::Error>> {
        let mut conn = self.db.get_conn().await?;
        conn.query_drop("DROP TABLE IF EXISTS t_red_packet, t_user_red_packet").await?;
        conn.query_drop(
            "CREATE TABLE t_red_packet (id INT PRIMARY KEY, stock INT NOT NULL, version INT NOT NULL DEFAULT 0) ENGINE=InnoDB",
        )
        .await?;
        conn.query_drop(
            "CREATE TABLE t_user_red_packet (id BIGINT AUTO_INCREMENT PRIMARY KEY, red_packet_id INT NOT NULL, \
             user_id VARCHAR(64) NOT NULL, amount DECIMAL(16,2) NOT NULL, grab_date TIMESTAMP NOT NULL, note VARCHAR(256)) ENGINE=InnoDB",
        )
        .await?;
        conn.exec_drop("INSERT INTO t_red_packet (id, stock) VALUES (1, ?)", (self.args.tickets,)).await?;
        drop(conn);
        let attempts = self.args.optimistic_attempts.max(1);
        let (seconds, told) = self
            .users(|u| async move {
                let user = format!("user-{round}-{u}");
                let mut conn = self.db.get_conn().await?;
                if design == Design::Pessimistic {
                    let mut tx = conn.start_transaction(TxOpts::default()).await?;
                    let stock: Option<i64> = tx.exec_first("SELECT stock FROM t_red_packet WHERE id = 1 FOR UPDATE", ()).await?;
                    if stock.unwrap_or(0) <= 0 {
                        tx.rollback().await?;
                        return Ok(Told::SoldOut);
                    }
                    tx.exec_drop("UPDATE t_red_packet SET stock = stock - 1 WHERE id = 1", ()).await?;
                    tx.exec_drop(
                        "INSERT INTO t_user_red_packet (red_packet_id, user_id, amount, grab_date, note) VALUES (1, ?, 10, NOW(), '')",
                        (&user,),
                    )
                    .await?;
                    tx.commit().await?;
                    return Ok(Told::Won);
                }
                for _ in 0..attempts {
                    let row: Option<(i64, i64)> =
                        conn.exec_first("SELECT stock, version FROM t_red_packet WHERE id = 1", ()).await?;
                    let (stock, version) = row.unwrap_or((0, 0));
                    if stock <= 0 {
                        return Ok(Told::SoldOut);
                    }
                    let mut tx = conn.start_transaction(TxOpts::default()).await?;
                    tx.exec_drop(
                        "UPDATE t_red_packet SET stock = stock - 1, version = version + 1 WHERE id = 1 AND version = ?",
                        (version,),
                    )
                    .await?;
                    if tx.affected_rows() == 0 {
                        tx.rollback().await?;
                        continue;
                    }
                    tx.exec_drop(
                        "INSERT INTO t_user_red_packet (red_packet_id, user_id, amount, grab_date, note) VALUES (1, ?, 10, NOW(), '')",
                        (&user,),
                    )
                    .await?;
                    tx.commit().await?;
                    return Ok(Told::Won);
                }
                Ok(Told::GaveUp)
            })
            .await?;
        let mut conn = self.db.get_conn().await?;
        let stock: Option<i64> = conn.query_first("SELECT stock FROM t_red_packet WHERE id = 1").await?;
        let rows: Option<(i64, i64)> =
            conn.query_first("SELECT COUNT(*), COUNT(DISTINCT user_id) FROM t_user_red_packet").await?;
        let (rows, distinct) = rows.unwrap_or((0, 0));
        Ok(self.checked(seconds, &told, rows, distinct, stock.unwrap_or(-1)))
    }

    async fn lecture_round(&self, round: usize) -> Result<Round, Box<dyn std::error::Error>> {
        let mut conn = self.db.get_conn().await?;
        conn.query_drop("DROP TABLE IF EXISTS t_lecture, t_ticket_order").await?;
        conn.query_drop("CREATE TABLE t_lecture (id INT PRIMARY KEY, remaining INT NOT NULL) ENGINE=InnoDB").await?;
        conn.query_drop(
            "CREATE TABLE t_ticket_order (id BIGINT AUTO_INCREMENT PRIMARY KEY, lecture_id INT NOT NULL, \
             user_id VARCHAR(64) NOT NULL, created_at TIMESTAMP NOT NULL, KEY by_user (user_id, lecture_id)) ENGINE=InnoDB",
        )
        .await?;
        conn.exec_drop("INSERT INTO t_lecture (id, remaining) VALUES (1, ?)", (self.args.tickets,)).await?;
        drop(conn);
        let (lock_key, stock_key, orders_key) =
            (format!("lecture:{round}:lock"), format!("lecture:{round}:stock"), format!("lecture:{round}:orders"));
        let unlock = redis::Script::new(
            "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end",
        );
        let (seconds, told) = self
            .users(|u| {
                let (lock_key, stock_key, orders_key, unlock) = (&lock_key, &stock_key, &orders_key, &unlock);
                async move {
                    let user = format!("user-{round}-{u}");
                    let mut redis = self.redis.clone();
                    let token = uuid::Uuid::now_v7().to_string();
                    // Redisson's blocking lock() waits for the holder; a short poll stands in for
                    // its pub/sub wake-up.
                    loop {
                        let got: Option<String> = redis::cmd("SET")
                            .arg(lock_key)
                            .arg(&token)
                            .arg("NX")
                            .arg("PX")
                            .arg(10_000)
                            .query_async(&mut redis)
                            .await?;
                        if got.is_some() {
                            break;
                        }
                        tokio::time::sleep(Duration::from_micros(500)).await;
                    }
                    let told = async {
                        let mut conn = self.db.get_conn().await?;
                        // check-stock: the cached counter, else the database (and cache it)
                        let cached: Option<i64> = redis.get(stock_key).await?;
                        let stock = match cached {
                            Some(s) => s,
                            None => {
                                let s: Option<i64> =
                                    conn.query_first("SELECT remaining FROM t_lecture WHERE id = 1").await?;
                                let s = s.unwrap_or(0);
                                let _: () = redis.set(stock_key, s).await?;
                                s
                            }
                        };
                        if stock <= 0 {
                            return Ok::<_, Box<dyn std::error::Error>>(Told::SoldOut);
                        }
                        // check-order: the cached set, else the database
                        if redis.sismember::<_, _, bool>(orders_key, &user).await? {
                            return Ok(Told::SoldOut);
                        }
                        let held: Option<i64> = conn
                            .exec_first("SELECT id FROM t_ticket_order WHERE user_id = ? AND lecture_id = 1", (&user,))
                            .await?;
                        if held.is_some() {
                            return Ok(Told::SoldOut);
                        }
                        let mut tx = conn.start_transaction(TxOpts::default()).await?;
                        tx.exec_drop(
                            "INSERT INTO t_ticket_order (lecture_id, user_id, created_at) VALUES (1, ?, NOW())",
                            (&user,),
                        )
                        .await?;
                        tx.exec_drop(
                            "UPDATE t_lecture SET remaining = remaining - 1 WHERE id = 1 AND remaining > 0",
                            (),
                        )
                        .await?;
                        if tx.affected_rows() == 0 {
                            tx.rollback().await?;
                            return Ok(Told::SoldOut);
                        }
                        tx.commit().await?;
                        // the seed deletes the cached stock after the write, and records the order
                        let _: () = redis.del(stock_key).await?;
                        let _: () = redis.sadd(orders_key, &user).await?;
                        Ok(Told::Won)
                    }
                    .await;
                    let _: i64 = unlock.key(lock_key).arg(&token).invoke_async(&mut redis).await?;
                    told
                }
            })
            .await?;
        let mut conn = self.db.get_conn().await?;
        let stock: Option<i64> = conn.query_first("SELECT remaining FROM t_lecture WHERE id = 1").await?;
        let rows: Option<(i64, i64)> =
            conn.query_first("SELECT COUNT(*), COUNT(DISTINCT user_id) FROM t_ticket_order").await?;
        let (rows, distinct) = rows.unwrap_or((0, 0));
        let mut redis = self.redis.clone();
        let _: () = redis.del(&[&lock_key, &stock_key, &orders_key]).await?;
        Ok(self.checked(seconds, &told, rows, distinct, stock.unwrap_or(-1)))
    }

    async fn our_round(&self, design: Design, round: usize) -> Result<Round, Box<dyn std::error::Error>> {
        let sale = self.open_sale(&format!("bench-{round}"), self.args.tickets).await?;
        // The events as API Gateway delivers them, each with its user's claims and verify hash.
        let requests: Vec<String> = (0..self.args.users).map(|u| sale.request(&format!("user-{round}-{u}"))).collect();
        let event = &sale.event;
        let grab = if design == Design::OursSqs { &self.sqs_grab } else { &self.stub_grab };
        let sent_before = self.stub_sends.load(Ordering::Relaxed);
        let requests = &requests;
        let (seconds, told) = self
            .users(|u| async move {
                let event: aws_lambda_events::apigw::ApiGatewayV2httpRequest =
                    serde_json::from_str(&requests[u as usize])?;
                let request = apigw::into_request(event);
                let status = if design == Design::Ours {
                    // The decision alone: the win is durable in the outbox; the send is timed apart.
                    match grab.decide(request).await {
                        Ok(decided) => decided.response.status().as_u16(),
                        Err(e) => e.status().as_u16(),
                    }
                } else {
                    grab.handle(request).await.status().as_u16()
                };
                match status {
                    202 => Ok(Told::Won),
                    409 => Ok(Told::SoldOut),
                    other => Err(format!("grab answered {other}").into()),
                }
            })
            .await?;
        let mut redis = self.redis.clone();
        let free: i64 = redis.llen(keys::seats(event)).await?;
        let buyers = self.real.gate.holdings(event).await?.len() as i64;
        let outbox: i64 = redis.hlen(keys::outbox(event)).await?;
        let mut result = self.checked(seconds, &told, buyers, buyers, free);
        let won = result.won as i64;
        let sent = match design {
            Design::Ours => won,
            Design::OursStub => (self.stub_sends.load(Ordering::Relaxed) - sent_before) as i64,
            _ => self.queue_depth().await?,
        };
        if result.checks.is_ok() && (outbox != won || sent != won) {
            result.checks = Err(format!("{won} won, {outbox} in the outbox, {sent} sent"));
        }
        self.forget(event).await?;
        if design == Design::OursSqs {
            self.sqs.purge_queue().queue_url(&self.bench_queue).send().await?;
        }
        Ok(result)
    }

    /// The grab handler's time per request, stage by stage, one request at a time (no contention):
    /// the event parsed as Lambda's runtime does, the claims, the verify hash, the script, and the
    /// SQS send to the stub and to MiniStack; then the whole handler for comparison.
    async fn split(&self, n: u32) -> Result<Value, Box<dyn std::error::Error>> {
        let sale = self.open_sale("split", n * 2).await?;
        let (event, settings) = (&sale.event, &self.settings);
        let stub_queue = self.stub_queue.clone();
        let real_queue = grab_queue(&self.sdk, self.bench_queue.clone());
        let mut stages: [Vec<Duration>; 7] = Default::default();
        for u in 0..n {
            let raw = sale.request(&format!("split-{u}"));
            let t0 = Instant::now();
            let parsed: aws_lambda_events::apigw::ApiGatewayV2httpRequest = serde_json::from_str(&raw)?;
            let req = apigw::into_request(parsed);
            let t1 = Instant::now();
            let caller = Caller::from_request(&req).map_err(|e| e.to_string())?;
            let t2 = Instant::now();
            let body: Value = serde_json::from_slice(req.body().as_ref())?;
            let now_ms = shared::domain::event::epoch_ms(OffsetDateTime::now_utc());
            let keys = settings.hash.keys.get().await.map_err(|e| e.to_string())?;
            keys.check(|k| k.verify(body["hash"].as_str().unwrap_or_default(), event, &caller.user, now_ms))
                .map_err(|_| "bad hash")?;
            let t3 = Instant::now();
            let order_id = OrderId::generate();
            let email = caller.email.as_ref().ok_or("the split's token carries no email")?;
            let now = OffsetDateTime::now_utc();
            let head = MessageHead::new(&order_id, event, &caller.user, email, &rfc3339(now));
            let attempt = GrabAttempt {
                event,
                user: &caller.user,
                order_id: &order_id,
                head: &head,
                clock_ms: shared::domain::event::epoch_ms(now),
            };
            let GrabOutcome::Granted { message, .. } = self.real.gate.grab(&attempt, settings.policy).await?.outcome
            else {
                return Err("the split's grab was not granted".into());
            };
            let t4 = Instant::now();
            stub_queue.send(&message, &settings.seal).await?;
            let t5 = Instant::now();
            real_queue.send(&message, &settings.seal).await?;
            let t6 = Instant::now();
            let whole = self
                .stub_grab
                .handle(apigw::into_request(serde_json::from_str(&sale.request(&format!("whole-{u}")))?))
                .await;
            let t7 = Instant::now();
            if whole.status() != 202 {
                return Err(format!("the split's whole grab answered {}", whole.status()).into());
            }
            for (i, d) in [t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5, t7 - t6].into_iter().enumerate() {
                stages[i].push(d);
            }
        }
        let names = [
            "event parsed (runtime)",
            "claims",
            "body + verify hash",
            "order message + grab script",
            "SQS send (stub)",
            "SQS send (MiniStack)",
            "whole handler (stub send)",
        ];
        println!();
        println!("grab handler per request, one at a time, n={n}: median (p99) in microseconds");
        let mut out = serde_json::Map::new();
        for (name, mut d) in names.into_iter().zip(stages) {
            d.sort();
            let us = |x: Duration| x.as_secs_f64() * 1e6;
            let (p50, p99) = (us(d[d.len() / 2]), us(d[d.len() * 99 / 100]));
            println!("  {name:<30} {p50:>9.1} ({p99:.1})");
            out.insert(name.into(), json!({ "p50_us": p50, "p99_us": p99 }));
        }
        self.forget(event).await?;
        self.sqs.purge_queue().queue_url(&self.bench_queue).send().await?;
        Ok(Value::Object(out))
    }

    /// Releases an event whose sale is open now, through the release function.
    async fn open_sale(&self, prefix: &str, capacity: u32) -> Result<Sale, Box<dyn std::error::Error>> {
        let now = OffsetDateTime::now_utc();
        let id = format!("{prefix}-{}", uuid::Uuid::now_v7().simple());
        let draft = EventDraft::from_json(&json!({
            "id": id, "title": "bench", "capacity": capacity,
            "sale_start": rfc3339(now - time::Duration::minutes(1)), "sale_end": rfc3339(now + time::Duration::hours(1)),
        }))?;
        self.real.release.release(draft, now).await?;
        Ok(Sale::new(EventId::parse(&id)?, self.settings.hash.clone())?)
    }

    /// Removes an event's keys from Redis once a round has counted them.
    async fn forget(&self, event: &EventId) -> Result<(), redis::RedisError> {
        self.redis.clone().del(&keys::cache(event)).await
    }

    async fn queue_depth(&self) -> Result<i64, Box<dyn std::error::Error>> {
        let attrs = self
            .sqs
            .get_queue_attributes()
            .queue_url(&self.bench_queue)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
            .send()
            .await?;
        Ok(attrs.attributes().and_then(|a| a.values().next()).and_then(|v| v.parse().ok()).unwrap_or(-1))
    }

    /// The invariants every design must keep: sold <= stock, the stock left plus the grabs stored
    /// equal the initial stock, one grab per user, and the users told they won = grabs stored.
    fn checked(&self, seconds: f64, told: &[Told], rows: i64, distinct: i64, stock_left: i64) -> Round {
        let won = told.iter().filter(|t| **t == Told::Won).count() as u64;
        let gave_up = told.iter().filter(|t| **t == Told::GaveUp).count() as u64;
        let tickets = i64::from(self.args.tickets);
        let checks = if rows > tickets {
            Err(format!("oversold: {rows} grabs for {tickets} tickets"))
        } else if rows + stock_left != tickets {
            Err(format!("stock {stock_left} + {rows} grabs != {tickets}"))
        } else if distinct != rows {
            Err(format!("{} users hold two grabs", rows - distinct))
        } else if won as i64 != rows {
            Err(format!("{won} users told they won, {rows} grabs stored"))
        } else {
            Ok(())
        };
        Round { seconds, won, gave_up, checks }
    }
}

/// An SQS endpoint on loopback that accepts every `SendMessage` at once and counts it: it takes the
/// emulator's cost out of the grab handler's figure (the SDK's own work stays in).
async fn stub_sqs(sends: Arc<AtomicU64>) -> Result<String, Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let app = axum::Router::new().fallback(move |_body: axum::body::Bytes| {
        let sends = sends.clone();
        async move {
            let n = sends.fetch_add(1, Ordering::Relaxed);
            (
                [("content-type", "application/x-amz-json-1.0")],
                format!(r#"{{"MessageId":"00000000-0000-4000-8000-{n:012}","MD5OfMessageBody":"-"}}"#),
            )
        }
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(url)
}

/// The orders queue as grab sends to it, built as the grab function builds it.
fn grab_queue(sdk: &aws_config::SdkConfig, url: String) -> OrderQueue {
    let settings = shared::config::QueueSettings::for_queue(url).expect("GRAB_SEND_BUDGET_MS");
    shared::setup::Adapters::new(sdk.clone()).grab_queue(&settings)
}
