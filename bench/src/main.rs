//! gate-bench: the product's grab script (`shared/adapters/src/gate/grab.lua`, the lean layout of docs/DESIGN.md
//! section 6) beside the seeds' four-command script (`bench/seeds.lua`) and the previous layout
//! (`bench/reference/grab-v1.lua`: buyers hash, per-user rate key, outbox sorted set, table
//! replies), on one redis-server, in one run.
//!
//! Each round replays the red-packet drop: `--tickets` tickets, `--users` distinct users, each
//! grabbing once over `--connections` connections. Rounds rotate between the scripts so machine
//! noise hits all alike. For each script it reports calls per second as the client saw them, the
//! server's own time per call (`INFO commandstats`, `usec_per_call` of `evalsha`) and how that
//! time splits between the Redis commands the script called (their own `commandstats`, which
//! count calls made from scripts) and the rest: Lua's own overhead (the call, arguments, the
//! interpreter, the reply). Medians over the rounds, and the ratios to the seeds' script.
//!
//! `scripts/stack start` then `cargo run --release -p bench -- [--rounds 5]`.

use std::time::{Duration, Instant};

use clap::Parser;
use redis::{Script, aio::MultiplexedConnection};
use shared::{
    config::GrabPolicy,
    domain::{Email, EventId, OrderId, UserId, event::epoch_ms, order::MessageHead},
    gate::{Gate, GrabAttempt},
};
use time::OffsetDateTime;

const GRAB: &str = shared::gate::GRAB_SOURCE;
const SEEDS: &str = include_str!("../seeds.lua");
const PREVIOUS: &str = include_str!("../reference/grab-v1.lua");
const UNCHECKED: &str = include_str!("../reference/grab-v2.lua");
const STANDALONE: &str = include_str!("../reference/grab-v3.lua");

#[derive(Parser)]
struct Args {
    #[arg(long, env = "REDIS_URL", default_value = "redis://127.0.0.1:16379")]
    redis_url: String,
    /// The client concurrency of loadgen's scenarios.
    #[arg(long, default_value_t = 64)]
    connections: usize,
    #[arg(long, default_value_t = 20_000)]
    tickets: u32,
    #[arg(long, default_value_t = 30_000)]
    users: u32,
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Count instructions too: the redis-server measured runs under valgrind's callgrind, writing
    /// its dumps into this directory (`valgrind --tool=callgrind --callgrind-out-file=<dir>/cg.%p.out
    /// redis-server ...`). Each round zeroes the counters before and dumps after
    /// (`callgrind_control`), and the report adds instructions per call: unlike time, they do not
    /// move with the machine's load. Use few users: callgrind runs Redis ~50x slower.
    #[arg(long)]
    callgrind: Option<std::path::PathBuf>,
    /// Measure another version of the product's script (same KEYS/ARGV) in place of grab.lua.
    #[arg(long)]
    design_script: Option<std::path::PathBuf>,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Seeds,
    /// The product's grab.lua.
    Design,
    /// The layout before docs/DESIGN.md section 6 was revised.
    Previous,
    /// grab.lua before it checked the cache's history (failover detection), on the same layout.
    Unchecked,
    /// grab.lua before the preamble was joined to it: the same script written out whole.
    Standalone,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::Seeds => "seeds",
            Self::Design => "design",
            Self::Previous => "previous",
            Self::Unchecked => "unchecked",
            Self::Standalone => "standalone",
        }
    }
}

struct Round {
    /// Server instructions per call, with `--callgrind`.
    instructions_per_call: Option<f64>,
    calls_per_sec: f64,
    usec_per_call: f64,
    /// Server time of the commands the script called, per script call.
    command_usec_per_call: f64,
    /// Commands called per script call.
    commands_per_call: f64,
    granted: u32,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    // The local stack's redis-server requires AUTH (scripts/stack); a bare one does not.
    let token = std::env::var("REDIS_AUTH_TOKEN").ok().filter(|t| !t.is_empty());
    let client = redis::Client::open(shared::gate::with_token(&args.redis_url, token.as_deref())?)?;
    let mut conns = Vec::new();
    for _ in 0..args.connections {
        conns.push(client.get_multiplexed_async_connection().await?);
    }
    let mut admin = client.get_multiplexed_async_connection().await?;
    let gate = Gate::new(&bench::sales::gate_settings(&args.redis_url, false, token.clone()))?;
    let version: String = redis::cmd("INFO").arg("server").query_async(&mut admin).await?;
    let version = version.lines().find_map(|l| l.strip_prefix("redis_version:")).unwrap_or("?").trim().to_owned();
    println!(
        "gate-bench: redis {version}; {} tickets, {} users grabbing once each, {} connections, {} rounds per script (alternating)",
        args.tickets, args.users, args.connections, args.rounds
    );

    let (mut seeds, mut design, mut previous, mut unchecked, mut standalone) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..args.rounds {
        // Rotate which goes first, so none always runs on a warmer or quieter machine.
        let mut order = [Kind::Seeds, Kind::Design, Kind::Previous, Kind::Unchecked, Kind::Standalone];
        order.rotate_left(round % 5);
        for kind in order {
            let r = run_round(kind, round, &args, &conns, &mut admin, &gate).await?;
            if r.granted != args.tickets.min(args.users) {
                return Err(
                    format!("round {round}: {} granted, expected {}", r.granted, args.tickets.min(args.users)).into()
                );
            }
            match kind {
                Kind::Seeds => seeds.push(r),
                Kind::Design => design.push(r),
                Kind::Previous => previous.push(r),
                Kind::Unchecked => unchecked.push(r),
                Kind::Standalone => standalone.push(r),
            }
        }
    }

    let med = |v: &[Round], f: fn(&Round) -> f64| {
        let mut x: Vec<f64> = v.iter().map(f).collect();
        x.sort_by(f64::total_cmp);
        x[x.len() / 2]
    };
    let spread = |v: &[Round]| {
        let us: Vec<f64> = v.iter().map(|r| r.usec_per_call).collect();
        let (lo, hi) = us.iter().fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
        format!("{lo:.2}-{hi:.2}")
    };
    // Each round's ratio to the seeds' round of the same index: noise that hits a whole round
    // hits both sides of its ratio.
    let ratio_to = |v: &[Round], base: &[Round]| {
        let mut x: Vec<f64> = v.iter().zip(base).map(|(r, s)| r.usec_per_call / s.usec_per_call).collect();
        x.sort_by(f64::total_cmp);
        (x[x.len() / 2], x[0], x[x.len() - 1])
    };
    let s_us = med(&seeds, |r| r.usec_per_call);
    println!();
    println!(
        "{:<38} {:>9} {:>10} {:>13} {:>9} {:>10} {:>9} {:>11}",
        "script", "calls/s", "usec/call", "spread", "commands", "cmd usec", "Lua usec", "vs seeds"
    );
    for (name, rounds) in [
        ("seeds (SISMEMBER, GET, DECR, SADD)", &seeds),
        ("grab.lua (product, lean layout)", &design),
        ("grab-v1.lua (previous layout)", &previous),
        ("grab-v2.lua (no history check)", &unchecked),
        ("grab-v3.lua (no preamble)", &standalone),
    ] {
        let (cps, us) = (med(rounds, |r| r.calls_per_sec), med(rounds, |r| r.usec_per_call));
        let cmd = med(rounds, |r| r.command_usec_per_call);
        println!(
            "{name:<38} {cps:>9.0} {us:>10.2} {:>13} {:>9.2} {cmd:>10.2} {:>9.2} {:>10.2}x",
            spread(rounds),
            med(rounds, |r| r.commands_per_call),
            us - cmd,
            us / s_us
        );
    }
    println!();
    for (name, rounds) in [("grab.lua", &design), ("grab-v1.lua", &previous)] {
        let (ratio, lo, hi) = ratio_to(rounds, &seeds);
        println!(
            "server time per call: {name} is {ratio:.2}x the seeds' (per-round ratios {lo:.2}-{hi:.2}; target at most 2x) -> {}",
            if ratio <= 2.0 { "within target" } else { "OVER target" }
        );
    }
    if args.callgrind.is_some() {
        let ins = |v: &[Round]| med(v, |r| r.instructions_per_call.unwrap_or_default());
        let s_ins = ins(&seeds);
        for (name, rounds) in [
            ("seeds", &seeds),
            ("grab.lua", &design),
            ("grab-v1.lua", &previous),
            ("grab-v2.lua", &unchecked),
            ("grab-v3.lua", &standalone),
        ] {
            println!(
                "instructions per call (callgrind): {name:<12} {:>8.0}  {:.2}x the seeds'",
                ins(rounds),
                ins(rounds) / s_ins
            );
        }
    }
    let (d_us, p_us) = (med(&design, |r| r.usec_per_call), med(&previous, |r| r.usec_per_call));
    println!("grab.lua takes {:.2}x the previous layout's server time per call", d_us / p_us);
    // grab.lua beside a variant of itself, same run: what one change to the script costs.
    let beside = |what: &str, variant: &str, other: &[Round]| {
        let (ratio, lo, hi) = ratio_to(&design, other);
        println!("{what}: grab.lua takes {ratio:.3}x the server time of {variant} (per-round ratios {lo:.3}-{hi:.3})");
        if args.callgrind.is_some() {
            let ins = |v: &[Round]| med(v, |r| r.instructions_per_call.unwrap_or_default());
            println!(
                "{what}: {:+.0} instructions per call ({:+.2}%)",
                ins(&design) - ins(other),
                (ins(&design) / ins(other) - 1.0) * 100.0
            );
        }
    };
    beside("failover detection", "the same script without the history check", &unchecked);
    beside("the preamble", "the same script written out whole, without preamble.lua", &standalone);
    for (kind, rounds) in [
        (Kind::Seeds, &seeds),
        (Kind::Design, &design),
        (Kind::Previous, &previous),
        (Kind::Unchecked, &unchecked),
        (Kind::Standalone, &standalone),
    ] {
        let per: Vec<String> =
            rounds.iter().map(|r| format!("{:.0}/s {:.2}us", r.calls_per_sec, r.usec_per_call)).collect();
        println!("  {:<8} rounds: {}", kind.name(), per.join(", "));
    }
    Ok(())
}

async fn run_round(
    kind: Kind,
    round: usize,
    args: &Args,
    conns: &[MultiplexedConnection],
    admin: &mut MultiplexedConnection,
    gate: &Gate,
) -> Result<Round, Box<dyn std::error::Error>> {
    let event = format!("bench-{}-{round}", kind.name());
    let keys = Keys::new(&event);
    let _: () = redis::cmd("DEL").arg(keys.all()).query_async(admin).await?;
    match kind {
        Kind::Seeds => {
            let _: () = redis::cmd("SET").arg(&keys.stock).arg(args.tickets).query_async(admin).await?;
        }
        Kind::Design | Kind::Unchecked | Kind::Standalone => {
            // Warmed by the product itself, so the bench meets the layout grab.lua expects.
            let now = OffsetDateTime::now_utc();
            let event = bench::sales::open_event(
                EventId::parse(&keys.event)?,
                "gate-bench",
                args.tickets,
                now - time::Duration::minutes(1),
            );
            gate.warm(&event).await?;
            if kind == Kind::Unchecked {
                // The field as grab-v2.lua reads it: without the history in its name.
                let opening = gate.opening(&event.id).await?;
                let from: String = redis::cmd("HGET").arg(&keys.meta).arg(&opening).query_async(admin).await?;
                let _: () = redis::cmd("HSET").arg(&keys.meta).arg("open_from").arg(from).query_async(admin).await?;
            }
        }
        Kind::Previous => {
            let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis() as u64;
            let mut pipe = redis::pipe();
            let mut first = 1;
            while first <= args.tickets {
                let last = (first + 9_999).min(args.tickets);
                pipe.rpush(&keys.seats, (first..=last).collect::<Vec<u32>>()).ignore();
                first = last + 1;
            }
            pipe.hset_multiple(
                &keys.meta,
                &[("capacity", args.tickets as u64), ("start", now_ms - 60_000), ("end", now_ms + 3_600_000)],
            )
            .ignore();
            pipe.query_async::<()>(admin).await?;
        }
    }
    let design = match &args.design_script {
        Some(path) => std::fs::read_to_string(path)?,
        None => GRAB.to_owned(),
    };
    let script = Script::new(match kind {
        Kind::Seeds => SEEDS,
        Kind::Design => &design,
        Kind::Previous => PREVIOUS,
        Kind::Unchecked => UNCHECKED,
        Kind::Standalone => STANDALONE,
    });
    // Load outside the measured window.
    let mut warm = conns[0].clone();
    script.prepare_invoke().load_async(&mut warm).await?;
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query_async(admin).await?;
    if args.callgrind.is_some() {
        bench::measure::callgrind_control("-z")?;
    }

    // The opening field the warm wrote (named after the primary's replication id).
    let opening = gate.opening(&EventId::parse(&keys.event)?).await?;
    let started = Instant::now();
    let per_conn = args.users.div_ceil(conns.len() as u32);
    let workers = conns.iter().enumerate().map(|(c, conn)| {
        let mut conn = conn.clone();
        let (script, keys, opening) = (&script, &keys, &opening);
        let event_id = EventId::parse(&keys.event).expect("a bench event id");
        let email = Email::parse("bench@example.com").expect("an address");
        let policy = GrabPolicy::default();
        async move {
            let mut granted = 0u32;
            for i in 0..per_conn {
                let u = c as u32 * per_conn + i;
                if u >= args.users {
                    break;
                }
                let user = format!("user-{u}");
                let ok = match kind {
                    Kind::Seeds => {
                        let r: i64 = script.key(&keys.stock).key(&keys.buyers).arg(&user).invoke_async(&mut conn).await?;
                        r == 1
                    }
                    Kind::Design | Kind::Unchecked | Kind::Standalone => {
                        // The product's own arguments: the message head and the script's time format.
                        let order = OrderId::parse(&format!("0199a0b0-0000-7000-8000-{u:012}")).expect("a UUID");
                        let user = UserId::parse(&user).expect("a user id");
                        let head = MessageHead::new(&order, &event_id, &user, &email, "2026-11-22T10:00:00Z");
                        let attempt = GrabAttempt {
                            event: &event_id,
                            user: &user,
                            order_id: &order,
                            head: &head,
                            clock_ms: epoch_ms(OffsetDateTime::now_utc()),
                        };
                        let mut call = script.key(&keys.meta);
                        call.key(&keys.seats).key(&keys.outbox);
                        let args = attempt.script_args(policy, opening);
                        // grab-v2.lua takes the first six (it names no history).
                        let used = if kind == Kind::Unchecked { &args[..6] } else { &args[..] };
                        for arg in used {
                            call.arg(arg);
                        }
                        let r: String = call.invoke_async(&mut conn).await?;
                        r.starts_with("OK:")
                    }
                    Kind::Previous => {
                        let order = format!("0199a0b0-0000-7000-8000-{u:012}");
                        let message = format!(
                            r#"{{"v":1,"order_id":"{order}","event_id":"{event}","user_id":"{user}","email":"{user}@example.com","created_at":"2026-11-22T10:00:00Z""#,
                            event = keys.event
                        );
                        let r: Vec<redis::Value> = script
                            .key(&keys.meta)
                            .key(&keys.seats)
                            .key(&keys.buyers)
                            .key(&keys.outbox)
                            .key(format!("ev:{{{}}}:rl:{user}", keys.event))
                            .arg(&user)
                            .arg(&order)
                            .arg(message)
                            .arg(5)
                            .arg(1000)
                            .invoke_async(&mut conn)
                            .await?;
                        matches!(r.first(), Some(redis::Value::BulkString(b)) if b == b"OK")
                    }
                };
                granted += u32::from(ok);
            }
            Ok::<u32, redis::RedisError>(granted)
        }
    });
    let granted: u32 = futures::future::try_join_all(workers).await?.into_iter().sum();
    let elapsed = started.elapsed().max(Duration::from_micros(1));

    let stats: String = redis::cmd("INFO").arg("commandstats").query_async(admin).await?;
    // cmdstat_<name>:calls=..,usec=..,usec_per_call=..
    let field = |line: &str, name: &str| -> Option<f64> {
        line.split([':', ',']).find_map(|f| f.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
    };
    let (mut script_calls, mut usec_per_call, mut command_usec, mut command_calls) = (0.0, None, 0.0, 0.0);
    for line in stats.lines().filter(|l| l.starts_with("cmdstat_")) {
        let name = line.trim_start_matches("cmdstat_").split(':').next().unwrap_or_default();
        match name {
            "evalsha" => {
                script_calls = field(line, "calls").unwrap_or_default();
                usec_per_call = field(line, "usec_per_call");
            }
            // The bench's own commands around the round.
            "info" | "config" | "script" | "del" => {}
            _ => {
                command_usec += field(line, "usec").unwrap_or_default();
                command_calls += field(line, "calls").unwrap_or_default();
            }
        }
    }
    let usec_per_call = usec_per_call.ok_or("no evalsha stats")?;
    let instructions_per_call = match &args.callgrind {
        Some(dir) => Some(bench::measure::dumped_instructions(dir)? / script_calls.max(1.0)),
        None => None,
    };
    if std::env::var_os("GATE_BENCH_COMMANDSTATS").is_some() {
        let name = kind.name();
        for line in stats.lines().filter(|l| l.starts_with("cmdstat_")) {
            eprintln!("  {name} round {round}: {line}");
        }
    }
    let _: () = redis::cmd("DEL").arg(keys.all()).query_async(admin).await?;
    Ok(Round {
        instructions_per_call,
        calls_per_sec: args.users as f64 / elapsed.as_secs_f64(),
        usec_per_call,
        command_usec_per_call: command_usec / script_calls.max(1.0),
        commands_per_call: command_calls / script_calls.max(1.0),
        granted,
    })
}

struct Keys {
    event: String,
    stock: String,
    buyers: String,
    meta: String,
    seats: String,
    outbox: String,
}

impl Keys {
    fn new(event: &str) -> Self {
        Self {
            event: event.to_owned(),
            stock: format!("seckill:stock:{event}"),
            buyers: format!("ev:{{{event}}}:buyers"),
            meta: format!("ev:{{{event}}}:meta"),
            seats: format!("ev:{{{event}}}:seats"),
            outbox: format!("ev:{{{event}}}:outbox"),
        }
    }

    fn all(&self) -> Vec<&str> {
        vec![&self.stock, &self.buyers, &self.meta, &self.seats, &self.outbox]
    }
}
