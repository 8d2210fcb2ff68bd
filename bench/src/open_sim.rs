//! open-sim: a model of a sale's open, simulated (docs/SCALE.md). A discrete-time simulation, one
//! step per millisecond, seeded and deterministic: users arrive, each asks for the verify hash and
//! then grabs; API Gateway's token bucket admits or refuses (429) each request; each function's
//! fleet of execution environments serves one request each, growing by Lambda's scaling rate
//! within the account's concurrency, each new environment after a cold start, a request finding
//! none throttled (refused like a 429); a grab waits in its environment for the decider (the
//! event's Redis shard running the grab script at its measured rate, or a design's own limit);
//! winners go to the queue and the mail drains at the consumers' and SES's rate. A refused request
//! is retried once a second, for up to 30 s (fans keep trying).
//!
//! Its inputs are the costs measured in docs/BENCHMARKS.md and AWS's published quotas; each is
//! named where it is set ([`Inputs`]). It prints the table docs/SCALE.md shows.

use std::collections::{BTreeMap, VecDeque};

use clap::Parser;
use rand::{RngExt, SeedableRng, rngs::StdRng};

#[derive(Parser)]
#[command(about = "A model of a sale's open: time to sell out, edge refusals, latency, fleet, cost")]
struct Args {
    #[arg(long, default_value_t = 20260)]
    seed: u64,
    /// Only the local red packet, against its measured figure.
    #[arg(long)]
    local: bool,
}

/// What decides a grab, and at what rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Decider {
    /// The grab script on one Redis shard, `rate` scripts per second; with `memory`, refusals of a
    /// sold-out event read a replica and skip the shard (docs/DESIGN.md section 6).
    Redis { rate: f64, memory: bool },
    /// A DynamoDB stock item decremented by a conditional update: every grab, won or refused, is a
    /// write to one partition (a failed condition consumes capacity too).
    DynamoItem { writes_per_s: f64 },
    /// The seeds' pessimistic row lock (MariaDB), at its measured rate.
    RowLock { rate: f64 },
}

#[derive(Debug, Clone)]
pub struct Inputs {
    pub name: String,
    pub users: u64,
    pub tickets: u64,
    /// Users arrive evenly over this span, each at a seeded random moment within it.
    pub arrive_over_s: f64,
    /// API Gateway's steady rate and burst, all routes together (account default: 10,000 and
    /// 5,000; AWS API Gateway quotas). `None`: no gateway (the local runner).
    pub edge: Option<(f64, f64)>,
    /// Concurrent executions the account allows (default 1,000; AWS Lambda quotas).
    pub account_concurrency: u64,
    /// Environments each function may add per 10 s (1,000; AWS Lambda scaling behaviour).
    pub scale_per_10s: u64,
    /// Provisioned (warm) environments per function (grab and verify-hash) at the open.
    pub warm: u64,
    /// A new environment's start: Lambda's own (AWS-side, not measurable here) plus the function's
    /// init (2.65 ms for grab, BENCHMARKS section 5).
    pub cold_start_ms: f64,
    /// verify-hash in its environment (BENCHMARKS section 7's durations).
    pub verify_ms: f64,
    /// A grab's own time around the decision: the handler (under 1 ms, BENCHMARKS section 4) and a
    /// Redis round trip in the VPC (~0.5 ms, section 7).
    pub grab_ms: f64,
    /// What a winner adds: `SendMessage` (~10 ms, section 7).
    pub win_extra_ms: f64,
    /// A refusal answered from the replica (a read, ~0.5 ms).
    pub read_ms: f64,
    pub decider: Decider,
    /// Winners' sends per second the queue takes (`None`: SQS, unbounded for this; the local
    /// emulator's raw `SendMessage`, BENCHMARKS section 1).
    pub send_rate: Option<f64>,
    /// Mails per second: the lower of the consumers' rate and SES's sending rate (SES's default
    /// for a new production account is 14/s; a quota to raise).
    pub mail_rate: f64,
    pub retry_after_ms: u64,
    pub tries: u32,
    /// A request finding every environment busy waits for one (a server's own queue, the local
    /// runner) instead of being throttled (Lambda).
    pub queue_when_busy: bool,
}

/// What the simulation saw.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub sold: u64,
    /// When the last ticket was granted (s after the first arrival); `None`: not sold out.
    pub sold_out_s: Option<f64>,
    /// Requests refused at the edge (API Gateway's 429) and throttled by Lambda, all tries.
    pub edge_refused: u64,
    pub throttled: u64,
    /// Users who never got a grab answered (refused at every try).
    pub gave_up: u64,
    /// A user's grab, first try to answer (retries included), p50 and p99 in ms.
    pub grab_p50_ms: f64,
    pub grab_p99_ms: f64,
    /// The most environments grab ran at once.
    pub peak_grab_envs: u64,
    /// When the last grab was answered, and the last mail sent.
    pub last_answer_s: f64,
    pub last_mail_s: f64,
    /// Lambda, API Gateway and provisioned concurrency, in dollars (list prices, BENCHMARKS
    /// section 7); SES's $0.10 per 1,000 mails apart.
    pub cost_usd: f64,
}

/// A group of requests that arrived at the same step, waiting together.
#[derive(Clone, Copy)]
struct Cohort {
    count: u64,
    /// When the user first tried this request (for the grab's latency).
    first_ms: u64,
    tries: u32,
    /// Past the edge already (waiting for an environment that is starting).
    admitted: bool,
}

/// One function's fleet: environments, those starting, those busy.
struct Fleet {
    envs: u64,
    starting: VecDeque<(u64, u64)>,
    busy: u64,
    scale_budget: f64,
    peak: u64,
    env_ms: f64,
}

impl Fleet {
    fn new(warm: u64, scale: u64) -> Self {
        Self { envs: warm, starting: VecDeque::new(), busy: 0, scale_budget: scale as f64, peak: warm, env_ms: 0.0 }
    }

    fn free(&self) -> u64 {
        self.envs - self.busy
    }

    /// What counts against the account's concurrency: requests in flight, and environments
    /// starting for one.
    fn in_flight(&self) -> u64 {
        self.busy + self.starting.iter().map(|(_, n)| n).sum::<u64>()
    }
}

const PRICE_LAMBDA_GB_S: f64 = 0.000_013_333_4;
const PRICE_PROVISIONED_GB_S: f64 = 0.000_003_333_4;
const PRICE_LAMBDA_REQUEST: f64 = 0.2 / 1e6;
const PRICE_API_REQUEST: f64 = 1.0 / 1e6;
/// How long a warm fleet is provisioned around the open: the product's window (docs/DESIGN.md
/// section 12), its lead before `sale_start` and its tail after.
const PROVISIONED_FOR_S: f64 =
    shared::domain::warm_fleet::LEAD.as_seconds_f64() + shared::domain::warm_fleet::TAIL.as_seconds_f64();

type Due = BTreeMap<u64, Vec<Cohort>>;

/// Requests answered: when their environments are free again (per kind), and the grabs' latencies.
#[derive(Default)]
struct Answered {
    finishing: BTreeMap<u64, [u64; 2]>,
    latencies: Vec<(u64, u64)>,
    last: u64,
}

impl Answered {
    /// `n` grabs first tried at `first_ms`, answered `ms` after `step`, holding their environments
    /// until then.
    fn grabs(&mut self, fleet: &mut Fleet, step: u64, ms: f64, first_ms: u64, n: u64) {
        let done = step + ms.ceil() as u64;
        self.finishing.entry(done).or_default()[1] += n;
        fleet.env_ms += n as f64 * ms;
        self.latencies.push((done - first_ms, n));
        self.last = self.last.max(done);
    }
}

fn push(due: &mut Due, at: u64, c: Cohort) {
    due.entry(at).or_default().push(c);
}

/// Runs one sale.
pub fn simulate(i: &Inputs, seed: u64) -> Outcome {
    let mut rng = StdRng::seed_from_u64(seed);
    let steps_arriving = (i.arrive_over_s * 1000.0).max(1.0) as u64;
    // Each user's arrival step; past two million users the same shape is scaled (less drawing).
    let drawn = i.users.min(2_000_000);
    let mut arrivals = vec![0u64; steps_arriving as usize];
    for _ in 0..drawn {
        arrivals[rng.random_range(0..steps_arriving) as usize] += 1;
    }
    if i.users > drawn {
        let scale = i.users as f64 / drawn as f64;
        let mut carried = 0.0;
        for a in arrivals.iter_mut() {
            let exact = *a as f64 * scale + carried;
            *a = exact.floor() as u64;
            carried = exact - exact.floor();
        }
    }

    let (rate, burst) = i.edge.unwrap_or((f64::INFINITY, f64::INFINITY));
    let mut tokens = burst;
    let mut fleets = [Fleet::new(i.warm, i.scale_per_10s), Fleet::new(i.warm, i.scale_per_10s)];
    // Requests due at the edge by step, per kind: 0 verify-hash, 1 grab.
    let mut due: [Due; 2] = [Due::new(), Due::new()];
    let mut answered = Answered::default();
    let mut deciding: VecDeque<Cohort> = VecDeque::new();
    let mut sends_waiting: VecDeque<Cohort> = VecDeque::new();
    let (mut decider_credit, mut send_credit) = (0.0f64, 0.0f64);
    let (mut sold, mut sold_out_at, mut edge_refused, mut throttled, mut gave_up) = (0u64, None, 0u64, 0u64, 0u64);
    let (mut sent, mut mailed, mut last_mail) = (0u64, 0.0f64, 0u64);
    let mut requests = 0u64;
    let (decide_rate, skips_when_sold_out) = match i.decider {
        Decider::Redis { rate, memory } => (rate, memory),
        Decider::DynamoItem { writes_per_s } => (writes_per_s, false),
        Decider::RowLock { rate } => (rate, false),
    };
    let account = i.account_concurrency.max(2 * i.warm);
    let cold_ms = i.cold_start_ms.ceil() as u64;
    let mut step = 0u64;
    loop {
        if let Some(&n) = arrivals.get(step as usize)
            && n > 0
        {
            push(&mut due[0], step, Cohort { count: n, first_ms: step, tries: 1, admitted: false });
        }
        tokens = (tokens + rate / 1000.0).min(burst);
        for fleet in fleets.iter_mut() {
            fleet.scale_budget = (fleet.scale_budget + i.scale_per_10s as f64 / 10_000.0).min(i.scale_per_10s as f64);
            while fleet.starting.front().is_some_and(|(ready, _)| *ready <= step) {
                let (_, n) = fleet.starting.pop_front().unwrap_or_default();
                fleet.envs += n;
            }
        }
        if let Some(done) = answered.finishing.remove(&step) {
            fleets[0].busy -= done[0];
            fleets[1].busy -= done[1];
        }
        // What is due now, per kind; the gateway's tokens go to both in proportion to what asks
        // (it does not put one route first).
        let now: [Vec<Cohort>; 2] = [0, 1].map(|kind| match due[kind].first_key_value() {
            Some((&at, _)) if at <= step => due[kind].pop_first().map(|(_, v)| v).unwrap_or_default(),
            _ => Vec::new(),
        });
        let asking: [u64; 2] = [0, 1].map(|k| now[k].iter().filter(|c| !c.admitted).map(|c| c.count).sum());
        let total_asking = (asking[0] + asking[1]).max(1) as f64;
        let share = [0, 1].map(|k| tokens.min(total_asking) * asking[k] as f64 / total_asking);
        tokens -= share[0] + share[1];
        for (kind, now) in now.into_iter().enumerate() {
            let mut mine = share[kind];
            for c in now {
                let admitted = if c.admitted {
                    c.count
                } else {
                    let a = ((mine + 1e-9).floor() as u64).min(c.count);
                    mine -= a as f64;
                    edge_refused += c.count - a;
                    requests += a;
                    a
                };
                let others = fleets[0].in_flight() + fleets[1].in_flight();
                let fleet = &mut fleets[kind];
                let served = admitted.min(fleet.free());
                let cold =
                    (fleet.scale_budget.floor() as u64).min(account.saturating_sub(others)).min(admitted - served);
                if cold > 0 {
                    fleet.scale_budget -= cold as f64;
                    fleet.starting.push_back((step + cold_ms, cold));
                    push(&mut due[kind], step + cold_ms.max(1), Cohort { count: cold, admitted: true, ..c });
                }
                let mut throttle = admitted - served - cold;
                fleet.busy += served;
                if i.queue_when_busy && throttle > 0 {
                    // A server of its own (the runner) holds the request until a handler is free.
                    push(&mut due[kind], step + 1, Cohort { count: throttle, admitted: true, ..c });
                    throttle = 0;
                }
                throttled += throttle;
                let retry = (c.count - admitted) + throttle;
                if retry > 0 {
                    if c.tries < i.tries {
                        let again = Cohort { count: retry, first_ms: c.first_ms, tries: c.tries + 1, admitted: false };
                        push(&mut due[kind], step + i.retry_after_ms, again);
                    } else {
                        gave_up += retry;
                    }
                }
                if served == 0 {
                    continue;
                }
                let c = Cohort { count: served, ..c };
                if kind == 0 {
                    // The grab follows the hash as soon as it is answered.
                    let done = step + i.verify_ms.ceil() as u64;
                    answered.finishing.entry(done).or_default()[0] += served;
                    fleets[0].env_ms += served as f64 * i.verify_ms;
                    push(&mut due[1], done, Cohort { count: served, first_ms: done, tries: 1, admitted: false });
                } else if skips_when_sold_out && sold >= i.tickets {
                    answered.grabs(&mut fleets[1], step, i.grab_ms + i.read_ms, c.first_ms, served);
                } else {
                    deciding.push_back(c);
                }
            }
            // Tokens this kind could not use go back to the bucket.
            tokens += mine.max(0.0);
        }
        // The decider at its rate; a grab holds its environment until it is answered.
        decider_credit += decide_rate / 1000.0;
        while let Some(front) = deciding.front_mut() {
            let n = (decider_credit.floor() as u64).min(front.count);
            if n == 0 {
                break;
            }
            decider_credit -= n as f64;
            let won = n.min(i.tickets - sold);
            sold += won;
            if won > 0 && sold == i.tickets {
                sold_out_at = Some(step);
            }
            let lost = n - won;
            if lost > 0 {
                answered.grabs(&mut fleets[1], step, i.grab_ms, front.first_ms, lost);
            }
            if won > 0 {
                sends_waiting.push_back(Cohort { count: won, ..*front });
            }
            front.count -= n;
            if front.count == 0 {
                deciding.pop_front();
            }
        }
        if deciding.is_empty() {
            decider_credit = decider_credit.min(1.0);
        }
        // Winners' sends, at the queue's rate (unbounded in AWS).
        send_credit = match i.send_rate {
            Some(r) => send_credit + r / 1000.0,
            None => f64::MAX,
        };
        while let Some(front) = sends_waiting.front_mut() {
            let n = (send_credit.floor().min(u64::MAX as f64) as u64).min(front.count);
            if n == 0 {
                break;
            }
            send_credit -= n as f64;
            answered.grabs(&mut fleets[1], step, i.grab_ms + i.win_extra_ms, front.first_ms, n);
            sent += n;
            front.count -= n;
            if front.count == 0 {
                sends_waiting.pop_front();
            }
        }
        if sends_waiting.is_empty() {
            send_credit = send_credit.min(1.0);
        }
        if mailed < sent as f64 {
            mailed = (mailed + i.mail_rate / 1000.0).min(sent as f64);
            last_mail = step;
        }
        fleets[1].peak = fleets[1].peak.max(fleets[1].busy);
        step += 1;
        let idle = due.iter().all(BTreeMap::is_empty) && deciding.is_empty() && sends_waiting.is_empty();
        if step as usize >= arrivals.len() && idle && answered.finishing.is_empty() {
            break;
        }
    }
    // The rest of the mail drains at its rate once every grab is answered.
    let last_mail_s = if mailed < sent as f64 {
        step as f64 / 1000.0 + (sent as f64 - mailed) / i.mail_rate
    } else {
        last_mail as f64 / 1000.0
    };
    let (p50, p99) = percentiles(&mut answered.latencies);
    let provisioned_s = if i.warm > 0 { PROVISIONED_FOR_S } else { 0.0 };
    let cost = (fleets[1].env_ms / 1000.0 * 0.5 + fleets[0].env_ms / 1000.0 * 0.25) * PRICE_LAMBDA_GB_S
        + requests as f64 * (PRICE_LAMBDA_REQUEST + PRICE_API_REQUEST)
        + i.warm as f64 * (0.5 + 0.25) * provisioned_s * PRICE_PROVISIONED_GB_S;
    Outcome {
        sold,
        sold_out_s: sold_out_at.map(|s| s as f64 / 1000.0),
        edge_refused,
        throttled,
        gave_up,
        grab_p50_ms: p50,
        grab_p99_ms: p99,
        peak_grab_envs: fleets[1].peak,
        last_answer_s: answered.last as f64 / 1000.0,
        last_mail_s,
        cost_usd: cost,
    }
}

fn percentiles(samples: &mut [(u64, u64)]) -> (f64, f64) {
    samples.sort_unstable();
    let total: u64 = samples.iter().map(|(_, n)| n).sum();
    let at = |q: f64| {
        let want = (total as f64 * q).ceil() as u64;
        let mut seen = 0;
        for (ms, n) in samples.iter() {
            seen += n;
            if seen >= want {
                return *ms as f64;
            }
        }
        0.0
    };
    if total == 0 { (0.0, 0.0) } else { (at(0.5), at(0.99)) }
}

/// The AWS-side costs, as docs/BENCHMARKS.md section 7 takes them, and the default quotas.
pub fn aws(name: &str, users: u64, tickets: u64, warm: bool, decider: Decider) -> Inputs {
    Inputs {
        name: name.into(),
        users,
        tickets,
        arrive_over_s: 10.0,
        edge: Some(if warm { (120_000.0, 60_000.0) } else { (10_000.0, 5_000.0) }),
        account_concurrency: if warm { 5_000 } else { 1_000 },
        scale_per_10s: 1_000,
        warm: if warm { 1_500 } else { 0 },
        cold_start_ms: 150.0,
        verify_ms: 2.0,
        grab_ms: 1.5,
        win_extra_ms: 10.0,
        read_ms: 0.5,
        decider,
        send_rate: None,
        mail_rate: if warm { 500.0 } else { 14.0 },
        retry_after_ms: 1_000,
        tries: 30,
        queue_when_busy: false,
    }
}

/// The grab script's rate on one shard, measured here (BENCHMARKS section 3: 48,502 calls/s).
pub const SHARD_SCRIPTS_PER_S: f64 = 48_502.0;
/// A sharded event's grab at its home bucket against an unsharded grab, in the server's
/// instructions (BENCHMARKS section 3, "One event over several buckets": 1.02x).
pub const HOME_PATH_COST: f64 = 1.02;

/// One hot event over `buckets` shards (docs/DESIGN.md section 6, "Buckets"): each bucket's shard
/// runs the home path at the measured script rate, so the event decides `buckets` times as fast.
/// The takes from siblings at the end of the sale (three scripts each, a few numbers in a
/// thousand in the tests' sales) are left out.
pub fn sharded(buckets: u16) -> Decider {
    Decider::Redis { rate: f64::from(buckets) * SHARD_SCRIPTS_PER_S / HOME_PATH_COST, memory: true }
}

/// A coupon campaign past one shard: a million users for 500,000 coupons within 10 s, the
/// gateway's quota raised to 300,000 requests/s (burst 150,000), 3,000 warm environments per
/// function and the account's concurrency at 10,000: what one event's shards then decide.
pub fn coupon_campaign(buckets: u16) -> Inputs {
    let mut i = aws(
        &format!("{buckets} bucket{}", if buckets == 1 { "" } else { "s" }),
        1_000_000,
        500_000,
        true,
        sharded(buckets),
    );
    i.edge = Some((300_000.0, 150_000.0));
    i.warm = 3_000;
    i.account_concurrency = 10_000;
    i
}
/// The seeds' row lock, measured here (BENCHMARKS section 2: 2,184 users/s).
pub const ROW_LOCK_PER_S: f64 = 2_184.0;
/// One DynamoDB partition's writes per second (AWS DynamoDB quotas).
pub const PARTITION_WRITES_PER_S: f64 = 1_000.0;

/// The local red packet as the model sees this machine: the runner is one process (64 requests in
/// flight, loadgen's concurrency), no gateway, no cold start, the emulator's `SendMessage` rate.
pub fn local_red_packet() -> Inputs {
    Inputs {
        name: "local red packet".into(),
        users: 30_000,
        tickets: 20_000,
        arrive_over_s: 0.5,
        edge: None,
        account_concurrency: 128,
        scale_per_10s: 0,
        warm: 64,
        cold_start_ms: 0.0,
        verify_ms: 3.4,
        grab_ms: 0.5,
        win_extra_ms: 0.9,
        read_ms: 0.2,
        decider: Decider::Redis { rate: SHARD_SCRIPTS_PER_S, memory: true },
        send_rate: Some(1_906.0),
        mail_rate: 1_000.0,
        retry_after_ms: 1_000,
        tries: 3,
        queue_when_busy: true,
    }
}

/// The red packet measured through the runner (BENCHMARKS section 1, round 1), first to last grab
/// reply: 20.06 s with the mail consumer beside the grabs, 9.76 s with it held (the model has no
/// consumer competing for the emulator).
pub const LOCAL_RED_PACKET_S: f64 = 20.06;
pub const LOCAL_RED_PACKET_HELD_S: f64 = 9.76;

fn row(i: &Inputs, o: &Outcome) {
    println!(
        "| {} | {} | {} | {} | {} | {:.0} / {:.0} | {} | {:.1} s | ${:.2} |",
        i.name,
        fmt(i.users),
        o.sold_out_s.map_or("not sold out".into(), |s| format!("{s:.1} s")),
        fmt(o.edge_refused + o.throttled),
        fmt(o.gave_up),
        o.grab_p50_ms,
        o.grab_p99_ms,
        fmt(o.peak_grab_envs),
        o.last_mail_s,
        o.cost_usd,
    );
}

fn fmt(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (k, c) in s.chars().enumerate() {
        if k > 0 && (s.len() - k).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn main() {
    let args = Args::parse();
    let local = local_red_packet();
    let o = simulate(&local, args.seed);
    println!(
        "open-sim (seed {}): the local red packet: all answered in {:.1} s (measured {LOCAL_RED_PACKET_HELD_S} s with the consumer held, {LOCAL_RED_PACKET_S} s beside it), sold out at {:.1} s",
        args.seed,
        o.last_answer_s,
        o.sold_out_s.unwrap_or(f64::NAN)
    );
    if args.local {
        return;
    }
    println!();
    println!(
        "| sale | users | sold out | refused at the edge (429, throttled) | gave up | grab p50 / p99 ms | peak grab environments | last mail | Lambda + API |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let redis = Decider::Redis { rate: SHARD_SCRIPTS_PER_S, memory: true };
    for users in [30_000, 1_000_000, 10_000_000] {
        for warm in [false, true] {
            let name = format!("20,000 tickets, {}", if warm { "warm fleet, quotas raised" } else { "defaults, cold" });
            let i = aws(&name, users, 20_000, warm, redis);
            row(&i, &simulate(&i, args.seed));
        }
    }
    for (name, decider) in [
        ("without the refusal memory", Decider::Redis { rate: SHARD_SCRIPTS_PER_S, memory: false }),
        ("a DynamoDB stock item", Decider::DynamoItem { writes_per_s: PARTITION_WRITES_PER_S }),
        ("the seeds' row lock", Decider::RowLock { rate: ROW_LOCK_PER_S }),
    ] {
        let i = aws(&format!("1,000,000 users, warm: {name}"), 1_000_000, 20_000, true, decider);
        row(&i, &simulate(&i, args.seed));
    }
    println!();
    println!(
        "One event past one shard: a coupon campaign, 1,000,000 users for 500,000 coupons within 10 s, the gateway at 300,000 requests/s, 3,000 warm environments per function"
    );
    println!();
    println!(
        "| buckets | the event decides | sold out | coupons granted per second until then | grab p50 / p99 ms | gave up |"
    );
    println!("|---|---|---|---|---|---|");
    for buckets in [1, 2, 3] {
        let i = coupon_campaign(buckets);
        let o = simulate(&i, args.seed);
        let Decider::Redis { rate, .. } = i.decider else { unreachable!("a Redis decider") };
        println!(
            "| {} | {} grabs/s | {} | {} | {:.0} / {:.0} | {} |",
            buckets,
            fmt(rate as u64),
            o.sold_out_s.map_or("not sold out".into(), |s| format!("{s:.1} s")),
            o.sold_out_s.map_or("-".into(), |s| fmt((o.sold as f64 / s) as u64)),
            o.grab_p50_ms,
            o.grab_p99_ms,
            fmt(o.gave_up),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_sale() {
        let i = aws("t", 30_000, 20_000, false, Decider::Redis { rate: SHARD_SCRIPTS_PER_S, memory: true });
        assert_eq!(simulate(&i, 7), simulate(&i, 7));
    }

    /// The model against the local red packet measured through the runner: the same order of
    /// magnitude (BENCHMARKS section 1: 20.06 s for 30,000 grabs on this machine's rates).
    #[test]
    fn the_model_meets_the_local_red_packet_within_its_order_of_magnitude() {
        let o = simulate(&local_red_packet(), 20260);
        assert_eq!(o.sold, 20_000, "every packet sold, none twice");
        for measured in [LOCAL_RED_PACKET_S, LOCAL_RED_PACKET_HELD_S] {
            let ratio = o.last_answer_s / measured;
            assert!((1.0 / 3.0..=3.0).contains(&ratio), "model {:.1} s against measured {measured} s", o.last_answer_s);
        }
    }

    /// Past one shard's rate the buckets decide how fast a hot event sells: three buckets sell the
    /// coupon campaign at over 100,000 coupons a second, one cannot.
    #[test]
    fn three_buckets_sell_a_hot_event_past_one_shards_rate() {
        let rate = |buckets| {
            let o = simulate(&coupon_campaign(buckets), 20260);
            assert_eq!(o.sold, 500_000, "every coupon sold, none twice");
            o.sold as f64 / o.sold_out_s.expect("sold out")
        };
        let (one, three) = (rate(1), rate(3));
        assert!(one < SHARD_SCRIPTS_PER_S, "one shard bounds it: {one:.0}/s");
        assert!(three > 100_000.0, "three buckets: {three:.0}/s");
    }

    #[test]
    fn nothing_is_sold_twice_and_every_user_is_answered_or_gives_up() {
        for warm in [false, true] {
            let o = simulate(
                &aws("t", 1_000_000, 20_000, warm, Decider::Redis { rate: SHARD_SCRIPTS_PER_S, memory: true }),
                3,
            );
            assert_eq!(o.sold, 20_000);
            assert!(o.sold_out_s.is_some());
        }
    }
}
