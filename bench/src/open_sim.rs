//! open-sim: a model of a sale's open, simulated (docs/SCALE.md). A discrete-time simulation, one
//! step per millisecond, seeded: users arrive (within a span, or a client's fixed number in
//! flight), each asks for the verify hash and then grabs. Before any function: an optional edge
//! (CloudFront answering from a per-event state object once it says sold out), then API Gateway's
//! token buckets (the stage's and each route's: 429). Each function's fleet: on demand, one request
//! per execution environment and at most 10 a second each, growing by Lambda's scaling rate within
//! the function's reserved concurrency or the account's, each new environment after a cold start
//! and its connections' handshakes; or Lambda Managed Instances, a fixed fleet running many
//! requests per environment within its vCPUs. A request finding no room is throttled. Redis is
//! masters with a core each: verify-hash's limiter on every master, the grab script on the
//! event's buckets' masters (a moved-home grab dearer), each new environment's handshake on every
//! master, the sold-out memory's renewals; a master's backlog delays what waits on it. Winners go
//! to the queue and the mail drains at the consumers' and SES's rate. A refused request is retried
//! once a second, for up to 30 s (fans keep trying).
//!
//! Every input is a cost measured here (docs/BENCHMARKS.md, the bench named) or AWS's published
//! quota or price (named where it is set: [`Inputs`], the constants below). It prints the tables
//! docs/SCALE.md shows, each scenario over a spread of seeds.

use std::collections::{BTreeMap, VecDeque};

use clap::Parser;
use rand::{RngExt, SeedableRng, rngs::StdRng};
use shared::domain::warm_fleet::{FleetSize, REQUESTS_PER_ENVIRONMENT};

#[derive(Parser)]
#[command(about = "A model of a sale's open: time to sell out, edge refusals, latency, fleet, cost")]
struct Args {
    /// The first seed; each scenario runs `--seeds` seeds from it.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, default_value_t = 10)]
    seeds: u64,
    /// Only the local red packet, against its measured figures.
    #[arg(long)]
    local: bool,
}

/// Server CPU per Redis operation, in microseconds (`redis-costs`, BENCHMARKS section 3, "What
/// each Redis operation costs the server": medians of 3 rounds, 2026-11-29). A won grab is what
/// the product runs for it: the grab script, then the order kept in its bucket's sent record
/// (`keep_sent.lua`, before the send), with its replicas' `WAIT` and the server's id after it. A
/// master has one core: a million microseconds a second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RedisCosts {
    pub grab_won: f64,
    pub grab_refused: f64,
    pub limiter: f64,
    /// A grab environment's second of counts written to the event's tally (one master's).
    pub tally: f64,
    /// What the sold-out memory asks of each of an event's buckets when it starts or is renewed,
    /// beyond the refusing script: the bucket's replication read and a `WAIT` for its replicas.
    pub sold_out_check: f64,
    /// A refusal of a sharded sold-out event, per bucket: the grab asks its home, then every
    /// sibling in turn (measured on fourteen buckets, divided by them).
    pub refused_per_bucket: f64,
    /// An idle connection's `PING`, which each warm environment's first request asks a master.
    pub ping: f64,
}

/// Each request alone on its connection, one at a time (a Lambda environment on demand), on a
/// cache as the template deploys ElastiCache: its engine (Valkey 8.0), TLS (in-transit encryption
/// on), cluster mode (each script asks `CLUSTER MYID`), two replicas per shard (`CacheNodes` 3:
/// the replication stream to each and each kept order's `WAIT` are the primary's to pay). The
/// sold-out check is the measured write, replication read and `WAIT` (45.5 us) less the write
/// alone (17.5 us); a sharded refusal's, 742.5 us on fourteen buckets; an idle connection's
/// `PING` 14.
pub const REDIS_COSTS: RedisCosts = RedisCosts {
    grab_won: 94.5,
    grab_refused: 29.0,
    limiter: 21.5,
    tally: 21.0,
    sold_out_check: 28.0,
    refused_per_bucket: 742.5 / 14.0,
    ping: 14.0,
};
/// The same on the plain port of a redis-server 7.0 on its own (no replica): this machine's
/// stack, which the local check runs against (its sold-out check, with no replica, is one `INFO`,
/// and its idle `PING`: neither measured, both left out; its sale is unsharded).
pub const REDIS_COSTS_PLAIN: RedisCosts = RedisCosts {
    grab_won: 40.0,
    grab_refused: 18.0,
    limiter: 12.5,
    tally: 11.5,
    sold_out_check: 0.0,
    refused_per_bucket: 18.0,
    ping: 0.0,
};
/// A new connection with TLS (ElastiCache's in-transit encryption, on by default): handshake,
/// AUTH, PING; in cluster mode (the client's own: a connection, `CLUSTER SLOTS`, then one to each
/// primary, this master's share); and a plain one (the local stack). (The sold-out memory's reads
/// go to replicas, which the model does not load.)
pub const TLS_CONNECT_US: f64 = 1_105.0;
pub const CLUSTER_CONNECT_US: f64 = 1_335.0;
pub const PLAIN_CONNECT_US: f64 = 70.0;
/// A sharded event's grab at home against an unsharded one, and a moved-home grab (numbers moved
/// from a sibling first), in the server's instructions (BENCHMARKS section 3, "One event over
/// several buckets": 1.02x and 1.35x).
pub const HOME_PATH_COST: f64 = 1.02;
pub const MOVED_HOME_COST: f64 = 1.35;

/// The event's cache: its masters, its buckets (one per master at most), what each call costs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cache {
    pub masters: u32,
    pub buckets: u32,
    pub costs: RedisCosts,
    /// Each new connection's cost (a TLS handshake, or a plain connect).
    pub connect_us: f64,
    /// The sold-out memory (DESIGN section 6): once sold out, an environment answers refusals from
    /// a replica read and runs the script once a second to renew it.
    pub memory: bool,
}

impl Cache {
    pub fn elasticache(masters: u32, buckets: u32) -> Self {
        let connect_us = if masters > 1 { CLUSTER_CONNECT_US } else { TLS_CONNECT_US };
        Cache { masters, buckets, costs: REDIS_COSTS, connect_us, memory: true }
    }
}

/// What decides a grab.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Decider {
    /// The grab script on the event's buckets.
    Redis(Cache),
    /// A DynamoDB stock item decremented by a conditional update: every grab, won or refused, is a
    /// write to one partition (a failed condition consumes capacity too).
    DynamoItem { writes_per_s: f64 },
    /// The seeds' pessimistic row lock (MariaDB), at its measured rate.
    RowLock { rate: f64 },
}

/// How users come.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrivals {
    /// Each at a seeded random moment within the span: a crowd.
    Within { seconds: f64 },
    /// A client keeping this many users in flight (loadgen: 64), the next starting as one ends.
    InFlight(u64),
}

/// Where the functions run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Compute {
    /// Lambda's default: one request at a time per environment, at most `max_rps` a second each
    /// (10: "Lambda scaling behavior"; `f64::INFINITY`: the local runner).
    OnDemand { max_rps: f64 },
    /// Lambda Managed Instances: `envs` environments per function running before the open (they
    /// scale on CPU over minutes, not at an open: "Scaling Lambda Managed Instances"), each with
    /// `vcpus` and up to `per_env` requests at once (Rust's default is 8 per vCPU).
    Managed { envs: u64, per_env: u64, vcpus: f64 },
}

/// API Gateway's throttles: the stage's (or the account's, the lower) and each route's (verify-hash,
/// grab), each a steady rate and a burst.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gateway {
    pub stage: (f64, f64),
    pub routes: [(f64, f64); 2],
}

/// CloudFront in front of the API with the event's state object (docs/DEPLOY.md, "The edge"):
/// once the object says sold out (at most `ttl_ms` after it is), a client that reads it is
/// answered there and asks nothing more.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Edge {
    pub ttl_ms: u64,
    /// The share of clients that read the state before asking (the product's pages do).
    pub honoured: f64,
    /// The requests a second the distribution takes (every request it sees: the state's reads,
    /// the API's calls, the refused); past it, CloudFront refuses and the client tries again.
    pub per_s: f64,
}

/// CloudFront's requests a second per distribution ("Quotas", Amazon CloudFront Developer Guide:
/// 250,000, adjustable).
pub const CLOUDFRONT_REQUESTS_PER_S: f64 = 250_000.0;

/// The mail after the open: the consumers' rate and SES's, the lower.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Drain {
    pub ses_per_s: f64,
    /// Concurrent mail invocations (the template's `MailMaximumConcurrency`), each a batch.
    pub consumers: u64,
    pub batch: u64,
    pub batch_ms: f64,
    /// The table's writes per second: a new on-demand table takes about 4,000 write units a
    /// second before it grows ("DynamoDB on-demand capacity mode": its initial throughput; warm
    /// throughput raises it ahead), and each stored order costs 12 (BENCHMARKS section 7).
    pub table_units_per_s: f64,
}

/// A new on-demand table's write units a second, before DynamoDB grows it.
pub const NEW_TABLE_UNITS_PER_S: f64 = 4_000.0;
/// Write units one stored and mailed order costs (BENCHMARKS section 7).
pub const UNITS_PER_ORDER: f64 = 12.0;

impl Drain {
    pub fn rate(&self) -> f64 {
        self.ses_per_s
            .min(self.consumers as f64 * self.batch as f64 * 1000.0 / self.batch_ms)
            .min(self.table_units_per_s / UNITS_PER_ORDER)
    }
}

#[derive(Debug, Clone)]
pub struct Inputs {
    pub name: String,
    pub users: u64,
    pub tickets: u64,
    pub arrivals: Arrivals,
    /// Each user asks verify-hash right before the grab (a hash had before the opening: false).
    pub verify_first: bool,
    pub edge: Option<Edge>,
    /// `None`: no gateway (the local runner).
    pub gateway: Option<Gateway>,
    pub compute: Compute,
    /// Concurrent executions the account allows (default 1,000: "Lambda quotas").
    pub account_concurrency: u64,
    /// Each function's reserved concurrency, its cap (verify-hash, grab).
    pub reserved: [Option<u64>; 2],
    /// Environments each function may add per 10 s (1,000: "Lambda scaling behavior").
    pub scale_per_10s: u64,
    /// Provisioned environments per function at the open (verify-hash, grab); they connected to
    /// the cache in their init (BENCHMARKS section 5), before the open.
    pub warm: [u64; 2],
    /// The share of the warm fleet whose connections died while it sat frozen: each such
    /// environment's first request finds it dead (the idle `PING`) and connects again, to every
    /// master, at the open.
    pub remade_at_open: f64,
    /// A new environment's start: Lambda's own (AWS-side, assumed) plus the function's init.
    pub cold_start_ms: f64,
    /// verify-hash in its environment (BENCHMARKS section 7's durations).
    pub verify_ms: f64,
    /// A grab's own time around the decision: the handler and a Redis round trip in the VPC.
    pub grab_ms: f64,
    /// What a winner adds: `SendMessage`.
    pub win_extra_ms: f64,
    /// A refusal answered from the replica.
    pub read_ms: f64,
    /// The environment's CPU per request (verify-hash, grab), what bounds a Managed Instance.
    pub cpu_ms: [f64; 2],
    pub decider: Decider,
    /// Winners' sends per second the queue takes (`None`: SQS, unbounded for this).
    pub send_rate: Option<f64>,
    pub drain: Drain,
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
    /// Tickets granted per second from the open to the last grant (the sell-out, or the end).
    pub grants_per_s: f64,
    /// Requests refused by the gateway (429) and throttled by Lambda, all tries.
    pub edge_refused: u64,
    pub throttled: u64,
    /// Requests answered at the edge from the state object (no function ran).
    pub edge_answered: u64,
    /// Invocations of verify-hash and grab.
    pub invocations: u64,
    /// Requests the users made, all tries (the edge's, the gateway's and the functions' together).
    pub asked: u64,
    pub gave_up: u64,
    /// A user's grab, first try to answer (retries included), p50 and p99 in ms.
    pub grab_p50_ms: f64,
    pub grab_p99_ms: f64,
    /// The most environments each function had (verify-hash, grab).
    pub peak_envs: [u64; 2],
    /// The cache: the busiest master's busiest second (its core's share; over 1: a backlog),
    /// handshakes each master served during the open, connections each master holds at the end.
    pub peak_master_load: f64,
    pub handshakes_per_master: u64,
    pub connections_per_master: u64,
    /// Grabs that moved numbers home first (a sharded event's home ran dry).
    pub moved_home: u64,
    pub last_answer_s: f64,
    pub last_mail_s: f64,
    /// Lambda (on demand or Managed Instances), API Gateway and the edge, in dollars (list
    /// prices below); SES's $0.10 per 1,000 mails and the cache's nodes apart.
    pub cost_usd: f64,
}

/// A group of requests that arrived at the same step, waiting together.
#[derive(Clone, Copy)]
struct Cohort {
    count: u64,
    /// When the user first tried this request (for the grab's latency).
    first_ms: u64,
    tries: u32,
    /// Past the gateway already (waiting for an environment that is starting, or for CPU).
    admitted: bool,
    /// When it took its environment's slot (what Lambda bills from).
    served_at: u64,
}

/// One function's fleet: environments, those starting, slots busy.
struct Fleet {
    envs: u64,
    /// Requests an environment runs at once.
    per_env: u64,
    starting: VecDeque<(u64, u64)>,
    busy: u64,
    scale_budget: f64,
    peak: u64,
    /// Busy time, in environment-milliseconds (on demand: what Lambda bills).
    env_ms: f64,
    /// Managed Instances: CPU-ms left this step.
    cpu_credit: f64,
    /// On demand: requests the fleet may still take (Lambda's per-environment rate).
    rps_credit: f64,
}

impl Fleet {
    fn new(envs: u64, per_env: u64, scale: u64) -> Self {
        Self {
            envs,
            per_env,
            starting: VecDeque::new(),
            busy: 0,
            scale_budget: scale as f64,
            peak: envs,
            env_ms: 0.0,
            cpu_credit: 0.0,
            rps_credit: envs as f64,
        }
    }

    fn free(&self) -> u64 {
        (self.envs * self.per_env).saturating_sub(self.busy)
    }

    /// What counts against reserved and account concurrency: the environments, and those starting
    /// (a short call's environment serves 10 requests a second, so the fleet is what it counts).
    fn held(&self) -> u64 {
        self.envs + self.starting.iter().map(|(_, n)| n).sum::<u64>()
    }
}

// List prices (us-east-1, arm64; each AWS pricing page named). Lambda: $0.0000133334 per GB-s,
// $0.20 per million requests, provisioned concurrency $0.0000033334 per GB-s (AWS Lambda pricing).
const PRICE_LAMBDA_GB_S: f64 = 0.000_013_333_4;
const PRICE_PROVISIONED_GB_S: f64 = 0.000_003_333_4;
const PRICE_LAMBDA_REQUEST: f64 = 0.2 / 1e6;
/// HTTP API: $1.00 per million requests (Amazon API Gateway pricing, the first 300 million).
const PRICE_API_REQUEST: f64 = 1.0 / 1e6;
/// CloudFront: $0.0100 per 10,000 HTTPS requests (Amazon CloudFront pricing, North America);
/// AWS WAF: $0.60 per million requests (AWS WAF pricing).
const PRICE_EDGE_REQUEST: f64 = 0.01 / 1e4 + 0.6 / 1e6;
/// Managed Instances: the EC2 instance's on-demand price plus 15% (AWS Lambda pricing); a
/// c7g.xlarge (4 vCPUs, 8 GiB) at $0.145 an hour (Amazon EC2 on-demand pricing): per vCPU-hour.
const PRICE_MANAGED_VCPU_HOUR: f64 = 0.145 / 4.0 * 1.15;
/// Memory: grab 512 MB, verify-hash 256 MB (template.yaml).
const MEMORY_GB: [f64; 2] = [0.25, 0.5];
/// How long a warm fleet is provisioned around the open: the product's window (docs/DESIGN.md
/// section 12), its lead before `sale_start` and its tail after.
const PROVISIONED_FOR_S: f64 =
    shared::domain::warm_fleet::LEAD.as_seconds_f64() + shared::domain::warm_fleet::TAIL.as_seconds_f64();

/// Managed Instances stand as long as their minimum is set (`OpenEnvironments`): an hour is
/// billed, the minimum raised before the open and lowered after by a deploy.
const MANAGED_STANDS_S: f64 = 3_600.0;

type Due = BTreeMap<u64, Vec<Cohort>>;

/// Requests answered: when their environments' slots are free again (per kind), when users are
/// done (the client's next may start), and the grabs' latencies.
#[derive(Default)]
struct Answered {
    freeing: BTreeMap<u64, [u64; 2]>,
    users_done: BTreeMap<u64, u64>,
    latencies: Vec<(u64, u64)>,
    last: u64,
}

impl Answered {
    /// `n` grabs first tried at `first_ms`, holding their slots since `served_at`, answered `ms`
    /// after `step` (at least the next step).
    fn grabs(&mut self, fleet: &mut Fleet, step: u64, ms: f64, served_at: u64, first_ms: u64, n: u64) {
        let done = step + (ms.ceil() as u64).max(1);
        *self.freeing.entry(done).or_default().get_mut(1).expect("two kinds") += n;
        *self.users_done.entry(done).or_default() += n;
        fleet.env_ms += n as f64 * (done - served_at.min(step)) as f64;
        self.latencies.push((done - first_ms, n));
        self.last = self.last.max(done);
    }
}

fn push(due: &mut Due, at: u64, c: Cohort) {
    due.entry(at).or_default().push(c);
}

/// `count` of `c`'s users refused at `step`: each tries again a second later, or past their tries
/// gives up (how many did).
fn try_again(due: &mut Due, answered: &mut Answered, c: &Cohort, count: u64, step: u64, i: &Inputs) -> u64 {
    if c.tries < i.tries {
        let again = Cohort { count, first_ms: c.first_ms, tries: c.tries + 1, admitted: false, served_at: 0 };
        push(due, step + i.retry_after_ms, again);
        0
    } else {
        *answered.users_done.entry(step).or_default() += count;
        count
    }
}

/// The event's masters: CPU demand per step and the backlog it leaves.
struct Masters {
    n: u32,
    buckets: u32,
    /// Each master's work waiting, in microseconds of its core.
    backlog: Vec<f64>,
    /// This second's work per master, and the busiest second seen.
    second: Vec<f64>,
    peak: f64,
    handshakes: u64,
    /// Free numbers per bucket (a sharded event's homes).
    stock: Vec<u64>,
}

impl Masters {
    fn new(cache: &Cache, tickets: u64) -> Self {
        let n = cache.masters.max(1);
        let buckets = cache.buckets.clamp(1, n);
        let stock =
            (0..buckets as u64).map(|b| tickets / buckets as u64 + u64::from(b < tickets % buckets as u64)).collect();
        Self {
            n,
            buckets,
            backlog: vec![0.0; n as usize],
            second: vec![0.0; n as usize],
            peak: 0.0,
            handshakes: 0,
            stock,
        }
    }

    /// Work spread evenly over every master (the limiter's users, a handshake on each).
    fn everywhere(&mut self, us_each: f64) {
        for (b, s) in self.backlog.iter_mut().zip(self.second.iter_mut()) {
            *b += us_each;
            *s += us_each;
        }
    }

    /// Work spread over the event's buckets' masters.
    fn on_buckets(&mut self, us_total: f64) {
        let each = us_total / self.buckets as f64;
        for m in 0..self.buckets as usize {
            self.backlog[m] += each;
            self.second[m] += each;
        }
    }

    /// A step's core time: each master works its backlog off.
    fn work(&mut self, step: u64) {
        for b in self.backlog.iter_mut() {
            *b = (*b - 1000.0).max(0.0);
        }
        if step % 1000 == 999 {
            let busiest = self.second.iter().copied().fold(0.0, f64::max) / 1e6;
            self.peak = self.peak.max(busiest);
            self.second.iter_mut().for_each(|s| *s = 0.0);
        }
    }

    /// The longest a request waits behind a bucket master's backlog (ms).
    fn bucket_wait_ms(&self) -> f64 {
        self.backlog[..self.buckets as usize].iter().copied().fold(0.0, f64::max) / 1000.0
    }

    fn mean_wait_ms(&self) -> f64 {
        self.backlog.iter().sum::<f64>() / self.n as f64 / 1000.0
    }
}

/// Runs one sale.
pub fn simulate(i: &Inputs, seed: u64) -> Outcome {
    let mut rng = StdRng::seed_from_u64(seed);
    // Each user's arrival step (a crowd); past two million users the same shape is scaled.
    let mut arrivals = Vec::new();
    if let Arrivals::Within { seconds } = i.arrivals {
        let steps = (seconds * 1000.0).max(1.0) as u64;
        let drawn = i.users.min(2_000_000);
        arrivals = vec![0u64; steps as usize];
        for _ in 0..drawn {
            arrivals[rng.random_range(0..steps) as usize] += 1;
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
    }
    let (mut started, mut active) = (0u64, 0u64);

    let gateway = i
        .gateway
        .unwrap_or(Gateway { stage: (f64::INFINITY, f64::INFINITY), routes: [(f64::INFINITY, f64::INFINITY); 2] });
    let mut stage_tokens = gateway.stage.1;
    let mut route_tokens = [gateway.routes[0].1, gateway.routes[1].1];
    // On demand, each environment serves at most `max_rps` requests a second: a function's fleet
    // takes requests at `envs x max_rps` a second (a bucket holding one request per environment,
    // so a new environment serves at once), whatever their durations.
    let (max_rps, managed) = match i.compute {
        Compute::OnDemand { max_rps } => (max_rps, false),
        Compute::Managed { .. } => (f64::INFINITY, true),
    };
    let mut fleets = [0, 1].map(|k| match i.compute {
        Compute::OnDemand { .. } => Fleet::new(i.warm[k], 1, i.scale_per_10s),
        Compute::Managed { envs, per_env, .. } => Fleet::new(envs, per_env, 0),
    });
    let cache = match i.decider {
        Decider::Redis(cache) => Some(cache),
        _ => None,
    };
    let mut masters = Masters::new(&cache.unwrap_or(Cache::elasticache(1, 1)), i.tickets);
    // Warm environments whose connections died while frozen connect again at their first request,
    // which a crowd faster than the fleet brings within the open's first milliseconds.
    if let Some(cache) = cache {
        let remade = ((i.warm[0] + i.warm[1]) as f64 * i.remade_at_open).round();
        masters.everywhere(remade * cache.connect_us);
        masters.handshakes += remade as u64;
        // The rest, idle since their init, ask one master drawn at random a `PING` first.
        let idle = match i.compute {
            Compute::Managed { envs, .. } => 2 * envs,
            Compute::OnDemand { .. } => i.warm[0] + i.warm[1],
        };
        masters.everywhere((idle as f64 - remade).max(0.0) * cache.costs.ping / f64::from(masters.n));
    }
    // Requests due at the gateway by step, per kind: 0 verify-hash, 1 grab.
    let mut due: [Due; 2] = [Due::new(), Due::new()];
    let mut answered = Answered::default();
    let mut deciding: VecDeque<Cohort> = VecDeque::new();
    let mut sends_waiting: VecDeque<Cohort> = VecDeque::new();
    let (mut decider_credit, mut send_credit) = (0.0f64, 0.0f64);
    let (mut sold, mut sold_out_at, mut first_grant, mut edge_refused, mut throttled, mut gave_up) =
        (0u64, None::<u64>, None::<u64>, 0u64, 0u64, 0u64);
    let (mut edge_answered, mut invocations, mut asked, mut moved_home) = (0u64, 0u64, 0u64, 0u64);
    // Requests the gateway let through (a throttled 429 is not billed).
    let mut let_through = 0u64;
    // Grabs served this second (their environments write the tally at its end).
    let mut grabs_this_second = 0u64;
    // The edge's requests in the current second: (the second, its requests so far).
    let mut edge_second = (0u64, 0.0f64);
    let (mut sent, mut mailed, mut last_mail) = (0u64, 0.0f64, 0u64);
    let mail_rate = i.drain.rate();
    let account = i.account_concurrency.max(i.warm[0] + i.warm[1]);
    let cold_ms = i.cold_start_ms.ceil() as u64;
    let first_kind = if i.verify_first { 0 } else { 1 };
    let mut step = 0u64;
    let mut memory_started = false;
    loop {
        // Who comes now.
        let coming = match i.arrivals {
            Arrivals::Within { .. } => arrivals.get(step as usize).copied().unwrap_or(0),
            Arrivals::InFlight(n) => {
                if let Some(done) = answered.users_done.remove(&step) {
                    active -= done.min(active);
                }
                let c = n.saturating_sub(active).min(i.users - started);
                active += c;
                c
            }
        };
        started += if matches!(i.arrivals, Arrivals::Within { .. }) { 0 } else { coming };
        if coming > 0 {
            push(
                &mut due[first_kind],
                step,
                Cohort { count: coming, first_ms: step, tries: 1, admitted: false, served_at: step },
            );
        }
        stage_tokens = (stage_tokens + gateway.stage.0 / 1000.0).min(gateway.stage.1);
        for (tokens, (rate, burst)) in route_tokens.iter_mut().zip(gateway.routes) {
            *tokens = (*tokens + rate / 1000.0).min(burst);
        }
        for fleet in fleets.iter_mut() {
            fleet.scale_budget = (fleet.scale_budget + i.scale_per_10s as f64 / 10_000.0).min(i.scale_per_10s as f64);
            while fleet.starting.front().is_some_and(|(ready, _)| *ready <= step) {
                let (_, n) = fleet.starting.pop_front().unwrap_or_default();
                fleet.envs += n;
                fleet.rps_credit += n as f64;
            }
            fleet.rps_credit = if max_rps.is_finite() {
                (fleet.rps_credit + fleet.envs as f64 * max_rps / 1000.0).min(fleet.envs as f64)
            } else {
                f64::MAX
            };
            if let Compute::Managed { envs, vcpus, .. } = i.compute {
                fleet.cpu_credit = envs as f64 * vcpus;
            }
            fleet.peak = fleet.peak.max(fleet.envs);
        }
        if let Some(done) = answered.freeing.remove(&step) {
            fleets[0].busy -= done[0].min(fleets[0].busy);
            fleets[1].busy -= done[1].min(fleets[1].busy);
        }
        // The state object says sold out from a refresh after the sell-out on.
        let edge_says_sold_out = match (i.edge, sold_out_at) {
            (Some(edge), Some(at)) => step >= at + edge.ttl_ms,
            _ => false,
        };
        // What is due now, per kind; the stage's tokens go to both in proportion to what asks
        // within each route's own (the gateway does not put one route first).
        let mut now: [Vec<Cohort>; 2] = [0, 1].map(|kind| match due[kind].first_key_value() {
            Some((&at, _)) if at <= step => due[kind].pop_first().map(|(_, v)| v).unwrap_or_default(),
            _ => Vec::new(),
        });
        // The distribution's quota first: every request it sees counts, the state's reads too (a
        // client that reads the state reads it before each try; once it says sold out, that read
        // is the try). What it refuses is tried again a second later.
        if let Some(edge) = i.edge {
            if edge_second.0 != step / 1000 {
                edge_second = (step / 1000, 0.0);
            }
            let per_try = if edge_says_sold_out { 1.0 } else { 1.0 + edge.honoured };
            for (kind, cohorts) in now.iter_mut().enumerate() {
                for c in cohorts.iter_mut().filter(|c| !c.admitted && c.count > 0) {
                    let room = ((edge.per_s - edge_second.1) / per_try).floor().max(0.0) as u64;
                    let refused = c.count.saturating_sub(room);
                    edge_second.1 += (c.count - refused) as f64 * per_try;
                    if refused == 0 {
                        continue;
                    }
                    c.count -= refused;
                    asked += refused;
                    edge_refused += refused;
                    gave_up += try_again(&mut due[kind], &mut answered, c, refused, step, i);
                }
            }
        }
        if edge_says_sold_out && let Some(edge) = i.edge {
            for cohorts in now.iter_mut() {
                for c in cohorts.iter_mut().filter(|c| !c.admitted) {
                    let told = (c.count as f64 * edge.honoured).round() as u64;
                    edge_answered += told;
                    asked += told;
                    *answered.users_done.entry(step).or_default() += told;
                    c.count -= told;
                }
            }
        }
        let asking: [u64; 2] = [0, 1].map(|k| now[k].iter().filter(|c| !c.admitted).map(|c| c.count).sum());
        let within_route: [f64; 2] = [0, 1].map(|k| route_tokens[k].min(asking[k] as f64));
        let total = (within_route[0] + within_route[1]).max(1.0);
        let share = [0, 1].map(|k| stage_tokens.min(total) * within_route[k] / total);
        stage_tokens -= share[0] + share[1];
        route_tokens[0] -= share[0];
        route_tokens[1] -= share[1];
        for (kind, now) in now.into_iter().enumerate() {
            let mut mine = share[kind];
            for c in now {
                if c.count == 0 {
                    continue;
                }
                let admitted = if c.admitted {
                    c.count
                } else {
                    asked += c.count;
                    let a = ((mine + 1e-9).floor() as u64).min(c.count);
                    mine -= a as f64;
                    edge_refused += c.count - a;
                    let_through += a;
                    a
                };
                let held = fleets[0].held() + fleets[1].held();
                let cap = i.reserved[kind].unwrap_or(u64::MAX);
                let fleet = &mut fleets[kind];
                let mut served = admitted.min(fleet.free()).min(fleet.rps_credit.floor() as u64);
                fleet.rps_credit -= served as f64;
                let mut wait_cpu = 0;
                if managed {
                    let by_cpu = (fleet.cpu_credit / i.cpu_ms[kind]).floor() as u64;
                    wait_cpu = served.saturating_sub(by_cpu);
                    served -= wait_cpu;
                    fleet.cpu_credit -= served as f64 * i.cpu_ms[kind];
                }
                // On demand, environments start for what finds none free, within the scaling rate,
                // the function's reserved concurrency and the account's.
                let room = cap.saturating_sub(fleet.held()).min(account.saturating_sub(held));
                let cold =
                    if managed { 0 } else { (fleet.scale_budget.floor() as u64).min(room).min(admitted - served) };
                if cold > 0 {
                    fleet.scale_budget -= cold as f64;
                    fleet.starting.push_back((step + cold_ms, cold));
                    push(&mut due[kind], step + cold_ms.max(1), Cohort { count: cold, admitted: true, ..c });
                    // Each new environment connects to every master at its first command.
                    if let Some(cache) = cache {
                        masters.everywhere(cold as f64 * cache.connect_us);
                        masters.handshakes += cold;
                    }
                }
                if wait_cpu > 0 {
                    // Managed Instances: the request has its slot and waits for a core.
                    push(&mut due[kind], step + 1, Cohort { count: wait_cpu, admitted: true, ..c });
                }
                let mut throttle = admitted - served - cold - wait_cpu;
                fleet.busy += served;
                if i.queue_when_busy && throttle > 0 {
                    // A server of its own (the runner) holds the request until a handler is free.
                    push(&mut due[kind], step + 1, Cohort { count: throttle, admitted: true, ..c });
                    throttle = 0;
                }
                throttled += throttle;
                let retry = (c.count - admitted) + throttle;
                if retry > 0 {
                    gave_up += try_again(&mut due[kind], &mut answered, &c, retry, step, i);
                }
                if served == 0 {
                    continue;
                }
                invocations += served;
                if kind == 1 {
                    grabs_this_second += served;
                }
                let c = Cohort { count: served, served_at: step, ..c };
                if kind == 0 {
                    // The limiter's round trip on the user's master, then the grab at once.
                    let wait = match cache {
                        Some(cache) => {
                            masters.everywhere(served as f64 * cache.costs.limiter / masters.n as f64);
                            masters.mean_wait_ms()
                        }
                        None => 0.0,
                    };
                    let ms = i.verify_ms + wait;
                    let done = step + (ms.ceil() as u64).max(1);
                    answered.freeing.entry(done).or_default()[0] += served;
                    fleets[0].env_ms += served as f64 * ms;
                    push(
                        &mut due[1],
                        done,
                        Cohort { count: served, first_ms: done, tries: 1, admitted: false, served_at: done },
                    );
                } else if cache.is_some_and(|c| c.memory) && sold >= i.tickets {
                    answered.grabs(&mut fleets[1], step, i.grab_ms + i.read_ms, step, c.first_ms, served);
                } else {
                    deciding.push_back(c);
                }
            }
            // Tokens this kind could not use go back to the buckets.
            stage_tokens += mine.max(0.0);
            route_tokens[kind] += mine.max(0.0);
        }
        // The sold-out memory's renewals: each grab environment runs the script once a memory's
        // span, which on a sharded event asks every bucket in turn (a
        // home sold out moves the grab to each sibling), then checks each bucket's replicas
        // before it remembers again.
        if let Some(cache) = cache
            && cache.memory
            && sold >= i.tickets
        {
            let scripts = if masters.buckets > 1 {
                masters.buckets as f64 * cache.costs.refused_per_bucket
            } else {
                cache.costs.grab_refused
            };
            let per_renewal = scripts + masters.buckets as f64 * cache.costs.sold_out_check;
            // Its start: every grab environment's next grab after the sell-out runs it, at once.
            if !memory_started {
                memory_started = true;
                masters.on_buckets(fleets[1].envs as f64 * per_renewal);
            }
            // The span, a second for each bucket, drawn up to `SOLD_OUT_MEMORY_SPREAD` times that.
            let span_s = masters.buckets as f64 * (1.0 + shared::gate::SOLD_OUT_MEMORY_SPREAD) / 2.0;
            masters.on_buckets(fleets[1].envs as f64 / 1000.0 / span_s * per_renewal);
        }
        // The decider; a grab holds its environment until it is answered.
        match (cache, i.decider) {
            (Some(cache), _) => {
                // The buckets' masters' core time left once their backlog is worked off.
                let mut credit: f64 =
                    (0..masters.buckets as usize).map(|m| (1000.0 - masters.backlog[m]).max(0.0)).sum();
                let spent_before = credit;
                while let Some(front) = deciding.front_mut() {
                    let total_stock: u64 = masters.stock.iter().sum();
                    let cost = if total_stock == 0 {
                        cache.costs.grab_refused
                    } else if masters.buckets == 1 {
                        cache.costs.grab_won
                    } else {
                        cache.costs.grab_won * HOME_PATH_COST
                    };
                    if credit < cost {
                        break;
                    }
                    // One grab at its user's home.
                    let home = rng.random_range(0..masters.buckets as usize);
                    let wait = masters.bucket_wait_ms();
                    if total_stock == 0 {
                        credit -= cost;
                        answered.grabs(&mut fleets[1], step, i.grab_ms + wait, front.served_at, front.first_ms, 1);
                    } else {
                        if masters.stock[home] == 0 {
                            // Home dry: numbers move from the richest sibling first.
                            let richest = (0..masters.stock.len()).max_by_key(|&b| masters.stock[b]).unwrap_or(0);
                            let moved = (masters.stock[richest] / 2).clamp(1, 64);
                            masters.stock[richest] -= moved;
                            masters.stock[home] += moved;
                            credit -= cache.costs.grab_won * (MOVED_HOME_COST - HOME_PATH_COST);
                            moved_home += 1;
                        }
                        masters.stock[home] -= 1;
                        credit -= cost;
                        sold += 1;
                        first_grant.get_or_insert(step);
                        if sold == i.tickets {
                            sold_out_at = Some(step);
                        }
                        sends_waiting.push_back(Cohort { count: 1, ..*front });
                    }
                    front.count -= 1;
                    if front.count == 0 {
                        deciding.pop_front();
                    }
                }
                masters.on_buckets(spent_before - credit);
            }
            (None, Decider::DynamoItem { writes_per_s: rate } | Decider::RowLock { rate }) => {
                decider_credit += rate / 1000.0;
                while let Some(front) = deciding.front_mut() {
                    let n = (decider_credit.floor() as u64).min(front.count);
                    if n == 0 {
                        break;
                    }
                    decider_credit -= n as f64;
                    let won = n.min(i.tickets - sold);
                    sold += won;
                    if won > 0 {
                        first_grant.get_or_insert(step);
                        if sold == i.tickets {
                            sold_out_at = Some(step);
                        }
                        sends_waiting.push_back(Cohort { count: won, ..*front });
                    }
                    if n > won {
                        answered.grabs(&mut fleets[1], step, i.grab_ms, front.served_at, front.first_ms, n - won);
                    }
                    front.count -= n;
                    if front.count == 0 {
                        deciding.pop_front();
                    }
                }
                if deciding.is_empty() {
                    decider_credit = decider_credit.min(1.0);
                }
            }
            (None, Decider::Redis(_)) => unreachable!("a Redis decider has its cache"),
        }
        // Each grab environment that served this second writes its counts to the event's tally,
        // at the second's end, on its shard's master (`gate/tally.rs`: the shards spread over the
        // masters as the buckets do).
        if step % 1000 == 999 {
            if let Some(cache) = cache {
                masters.everywhere(grabs_this_second.min(fleets[1].envs) as f64 * cache.costs.tally / masters.n as f64);
            }
            grabs_this_second = 0;
        }
        masters.work(step);
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
            answered.grabs(&mut fleets[1], step, i.grab_ms + i.win_extra_ms, front.served_at, front.first_ms, n);
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
            mailed = (mailed + mail_rate / 1000.0).min(sent as f64);
            last_mail = step;
        }
        step += 1;
        let idle = due.iter().all(BTreeMap::is_empty) && deciding.is_empty() && sends_waiting.is_empty();
        let all_came = match i.arrivals {
            Arrivals::Within { .. } => step as usize >= arrivals.len(),
            Arrivals::InFlight(_) => started == i.users,
        };
        if all_came && idle && answered.freeing.is_empty() {
            break;
        }
    }
    let last_mail_s = if mailed < sent as f64 {
        step as f64 / 1000.0 + (sent as f64 - mailed) / mail_rate
    } else {
        last_mail as f64 / 1000.0
    };
    let (p50, p99) = percentiles(&mut answered.latencies);
    let lambda = match i.compute {
        Compute::OnDemand { .. } => {
            (0..2).map(|k| fleets[k].env_ms / 1000.0 * MEMORY_GB[k]).sum::<f64>() * PRICE_LAMBDA_GB_S
                + (0..2).map(|k| i.warm[k] as f64 * MEMORY_GB[k]).sum::<f64>()
                    * PROVISIONED_FOR_S
                    * PRICE_PROVISIONED_GB_S
        }
        Compute::Managed { envs, vcpus, .. } => {
            2.0 * envs as f64 * vcpus * MANAGED_STANDS_S / 3600.0 * PRICE_MANAGED_VCPU_HOUR
        }
    };
    let cost = lambda
        + invocations as f64 * PRICE_LAMBDA_REQUEST
        + if i.gateway.is_some() { let_through as f64 * PRICE_API_REQUEST } else { 0.0 }
        + if i.edge.is_some() { asked as f64 * PRICE_EDGE_REQUEST } else { 0.0 };
    let sold_out_s = sold_out_at.map(|s| s as f64 / 1000.0);
    // From the open: a sale whose grabs wait behind a saturated master grants late, not fast.
    let last_grant = sold_out_at.unwrap_or(step).max(1);
    let grants_per_s = if first_grant.is_some() { sold as f64 / (last_grant as f64 / 1000.0) } else { 0.0 };
    Outcome {
        sold,
        sold_out_s,
        grants_per_s,
        edge_refused,
        throttled,
        edge_answered,
        invocations,
        asked,
        gave_up,
        grab_p50_ms: p50,
        grab_p99_ms: p99,
        peak_envs: [fleets[0].peak, fleets[1].peak],
        peak_master_load: masters.peak,
        handshakes_per_master: masters.handshakes,
        connections_per_master: if cache.is_some() { fleets[0].envs + fleets[1].envs } else { 0 },
        moved_home,
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

/// A parameter's default in template.yaml (read here, so the model's default scenario is the
/// template's own).
fn template_default(parameter: &str) -> f64 {
    const TEMPLATE: &str = include_str!("../../template.yaml");
    let mut lines = TEMPLATE.lines().skip_while(|l| l.trim_end() != format!("  {parameter}:"));
    lines
        .by_ref()
        .nth(1)
        .into_iter()
        .chain(lines.take(3))
        .find_map(|l| l.trim().strip_prefix("Default:"))
        .and_then(|v| v.trim().trim_matches('"').parse().ok())
        .unwrap_or_else(|| panic!("template.yaml gives {parameter} a numeric default"))
}

/// A function's reserved concurrency as a sale is deployed: production's environment's
/// (samconfig.toml), the template reserving none by default so that a first deploy fits any account.
fn reserved_concurrency(parameter: &str) -> f64 {
    const SAMCONFIG: &str = include_str!("../../samconfig.toml");
    let production = SAMCONFIG.split("[production.deploy.parameters]").nth(1).unwrap_or_default();
    production
        .lines()
        .find(|l| l.starts_with("parameter_overrides"))
        .and_then(|l| l.split_whitespace().find_map(|kv| kv.trim_matches('"').strip_prefix(&format!("{parameter}="))))
        .and_then(|v| v.trim_matches('"').parse().ok())
        .unwrap_or_else(|| template_default(parameter))
}

/// The template's defaults (template.yaml, read) in an account with AWS's: the stage's throttle,
/// the grab and verify-hash routes', both functions' reserved concurrency (production's, above)
/// and the mail consumers';
/// the account's 1,000 concurrent executions (AWS Lambda quotas); no warm fleet; the cache one
/// master; SES at a new production account's 14 mails/s (Amazon SES quotas), batches of 10 mails
/// (80 ms a batch: BENCHMARKS section 7).
pub fn template_defaults(name: &str, users: u64, tickets: u64) -> Inputs {
    Inputs {
        name: name.into(),
        users,
        tickets,
        arrivals: Arrivals::Within { seconds: 10.0 },
        verify_first: true,
        edge: None,
        gateway: Some(Gateway {
            stage: (template_default("ThrottlingRateLimit"), template_default("ThrottlingBurstLimit")),
            routes: [
                (template_default("VerifyHashThrottle"), template_default("VerifyHashThrottle")),
                (template_default("GrabThrottle"), template_default("GrabThrottle")),
            ],
        }),
        compute: Compute::OnDemand { max_rps: f64::from(REQUESTS_PER_ENVIRONMENT) },
        account_concurrency: 1_000,
        reserved: [
            Some(reserved_concurrency("VerifyHashReservedConcurrency") as u64),
            Some(reserved_concurrency("GrabReservedConcurrency") as u64),
        ],
        scale_per_10s: 1_000,
        warm: [0, 0],
        // Lambda's own start (AWS-side, assumed) and the function's init (2.65 ms, section 5).
        cold_start_ms: 150.0,
        verify_ms: 2.0,
        grab_ms: 1.5,
        win_extra_ms: 10.0,
        read_ms: 0.5,
        // The handler's CPU (BENCHMARKS section 4: the event parsed, the claims, the HMAC, the
        // script's round trip and the send's SDK work: about 0.1 ms for verify-hash, 0.3 for a grab).
        cpu_ms: [0.1, 0.3],
        decider: Decider::Redis(Cache::elasticache(1, 1)),
        send_rate: None,
        drain: Drain {
            ses_per_s: 14.0,
            consumers: template_default("MailMaximumConcurrency") as u64,
            batch: template_default("MailBatchSize") as u64,
            batch_ms: 80.0,
            table_units_per_s: NEW_TABLE_UNITS_PER_S,
        },
        retry_after_ms: 1_000,
        tries: 30,
        queue_when_busy: false,
        remade_at_open: 0.0,
    }
}

/// The quotas raised and a warm fleet: API Gateway's account rate at 120,000/s (burst 60,000) and the
/// template's throttles raised to it, no reserved caps, the account's concurrency 5,000, 1,500
/// provisioned environments per function, SES at 500/s with 50 mail consumers.
pub fn warm(name: &str, users: u64, tickets: u64) -> Inputs {
    let mut i = template_defaults(name, users, tickets);
    i.gateway = Some(Gateway { stage: (120_000.0, 60_000.0), routes: [(120_000.0, 60_000.0); 2] });
    i.account_concurrency = 5_000;
    i.reserved = [None, None];
    i.warm = [1_500, 1_500];
    i.drain =
        Drain { ses_per_s: 500.0, consumers: 50, batch: 10, batch_ms: 80.0, table_units_per_s: NEW_TABLE_UNITS_PER_S };
    i
}

/// The same quotas with grab and verify-hash on Lambda Managed Instances: `envs` environments per
/// function of 4 vCPUs each, 32 requests at once (8 per vCPU, Rust's default). Their requests cost
/// the masters what one at a time costs ([`REDIS_COSTS`], not the pipelined figures of BENCHMARKS
/// section 3): an environment's requests share its connection to each master, but at these rates
/// fewer than one is in flight on each (the hot event's 106,000 grabs a second, three round trips
/// of about 0.5 ms each, are some 160 in flight over 48 environments' 8 connections each), so there
/// is nothing for redis-rs to pipeline.
pub fn managed(name: &str, users: u64, tickets: u64, envs: u64) -> Inputs {
    let mut i = warm(name, users, tickets);
    i.compute = Compute::Managed { envs, per_env: 32, vcpus: 4.0 };
    i.warm = [0, 0];
    i
}

/// CloudFront and the state object in front (a second's cache), `honoured` of the clients reading
/// it before they ask (a client that does not, a script, meets only the web ACL).
pub fn with_edge(mut i: Inputs, honoured: f64) -> Inputs {
    i.edge = Some(Edge { ttl_ms: 1_000, honoured, per_s: CLOUDFRONT_REQUESTS_PER_S });
    i.name = format!("{}, edge ({:.0}% of clients read the state)", i.name, honoured * 100.0);
    i
}

/// The seeds' row lock, measured here (BENCHMARKS section 2: 2,184 users/s).
pub const ROW_LOCK_PER_S: f64 = 2_184.0;
/// One DynamoDB partition's writes per second (AWS DynamoDB quotas).
pub const PARTITION_WRITES_PER_S: f64 = 1_000.0;

/// One hot event of `tickets` coupons for a crowd arriving faster than it can be served (three
/// million users within 10 s), the gateway at 600,000 requests/s, `buckets` buckets on as many
/// masters: what 100,000 grabs a second takes. On demand: the warm fleet the product provisions
/// for an `expected_rate` of `rate` (`FleetSize::for_rate`: a tenth of the rate for verify-hash, a
/// fifth more for grab), each function's reserved concurrency the same (a crowd above it is
/// throttled, not met by new environments whose handshakes would land on every master), the
/// account's concurrency above both.
pub fn hot_event(buckets: u32, rate: u32) -> Inputs {
    let fleet = FleetSize::for_rate(rate);
    let (verify, grab) = (u64::from(fleet.verify_hash), u64::from(fleet.grab));
    let mut i = warm(
        &format!(
            "{buckets} bucket{}, warm for {}/s ({} + {}) and capped",
            if buckets == 1 { "" } else { "s" },
            fmt(u64::from(rate)),
            fmt(verify),
            fmt(grab)
        ),
        3_000_000,
        HOT_TICKETS,
    );
    // The routes' throttles as an operator sets them for the open (DEPLOY.md, "Before a big sale"):
    // verify-hash's at the rate (`HOT_RATE` for a fleet not provisioned), so a crowd's verify-hash
    // cannot spend the stage's budget on grabs.
    let r = f64::from(if rate == 0 { HOT_RATE } else { rate });
    i.gateway = Some(Gateway { stage: (600_000.0, 300_000.0), routes: [(r, r), (2.0 * r, 2.0 * r)] });
    i.warm = [verify, grab];
    i.reserved = [Some(verify), Some(grab)];
    i.account_concurrency = verify + grab + 1_000;
    i.decider = Decider::Redis(Cache::elasticache(buckets, buckets));
    i.drain = Drain {
        ses_per_s: 5_000.0,
        consumers: 500,
        batch: 10,
        batch_ms: 80.0,
        table_units_per_s: NEW_TABLE_UNITS_PER_S,
    };
    i
}

/// The expected rate the hot event is released with: its warm fleet serves 120,000 users a second.
pub const HOT_RATE: u32 = 120_000;

/// The hot event's coupons: the most an event may be released with (`MAX_CAPACITY`), so the model
/// sells an event the release accepts.
pub const HOT_TICKETS: u64 = shared::domain::event::MAX_CAPACITY as u64;

/// The hot event on Lambda Managed Instances: 48 environments per function of 4 vCPUs, 32
/// requests at once each (Rust's default of 8 per vCPU), started before the open; their requests
/// as costly to the masters as on demand (see [`managed`]).
pub fn hot_managed(buckets: u32) -> Inputs {
    let mut i = hot_event(buckets, 0);
    i.compute = Compute::Managed { envs: 48, per_env: 32, vcpus: 4.0 };
    i.reserved = [None, None];
    // The routes' bursts a tenth of their rates: nothing else admits the crowd at the open (no
    // environment's 10 a second), and a burst of 120,000 verify-hash calls at once would spend a
    // fifth of every master's first second on the limiter.
    if let Some(g) = &mut i.gateway {
        for (rate, burst) in &mut g.routes {
            *burst = *rate / 10.0;
        }
    }
    i.name = format!(
        "{buckets} buckets, Managed Instances (48 environments of 4 vCPUs per function, the routes' bursts a tenth of their rates)"
    );
    i
}

/// The hot event on the claim's buckets behind CloudFront, every client reading the state first: at the
/// distribution's quota (250,000 requests a second, which the crowd's state reads, calls and
/// retries all count against), and with it raised above the crowd's rate.
pub fn hot_behind_the_edge() -> [Inputs; 2] {
    [CLOUDFRONT_REQUESTS_PER_S, HOT_EDGE_QUOTA].map(|per_s| {
        let mut i = with_edge(hot_event(CLAIM_BUCKETS, HOT_RATE), 1.0);
        if let Some(edge) = &mut i.edge {
            edge.per_s = per_s;
        }
        i.name =
            format!("{CLAIM_BUCKETS} buckets, warm and capped, behind CloudFront at {} requests/s", fmt(per_s as u64));
        i
    })
}

/// The fewest buckets (each on its own master) that grant 100,000 a second on demand, warm and
/// capped, at every seed; and on Managed Instances (the tests below hold both). Both within what a
/// release accepts (`MAX_BUCKETS`).
pub const CLAIM_BUCKETS: u32 = 14;
const _: () = assert!(
    CLAIM_BUCKETS <= shared::domain::event::MAX_BUCKETS as u32
        && CLAIM_MANAGED_BUCKETS <= shared::domain::event::MAX_BUCKETS as u32
);
pub const CLAIM_MANAGED_BUCKETS: u32 = 14;

/// The distribution's quota the hot event needs (a support case: "Quotas", CloudFront): above its
/// crowd's requests, each user's state reads, verify-hash and grab and the retries of those refused.
pub const HOT_EDGE_QUOTA: f64 = 1_500_000.0;

/// The local red packet as the model sees this machine (BENCHMARKS section 1, the consumer held):
/// loadgen keeps 64 grabs in flight, the hashes had before the opening; the runner is one
/// process (no gateway, no cold start, no per-environment cap); the emulator takes `SendMessage`
/// at its raw rate measured beside that sale (2,277/s); Redis is the stack's, connected.
pub fn local_red_packet() -> Inputs {
    let mut i = template_defaults("local red packet", 30_000, 20_000);
    i.arrivals = Arrivals::InFlight(64);
    i.verify_first = false;
    i.gateway = None;
    i.compute = Compute::OnDemand { max_rps: f64::INFINITY };
    i.account_concurrency = 128;
    i.reserved = [None, None];
    i.scale_per_10s = 0;
    i.warm = [64, 64];
    i.cold_start_ms = 0.0;
    // The grab's own time beside its send: the handler and the script's round trip here
    // (BENCHMARKS section 4: 0.17 ms); the send is the emulator's rate.
    i.grab_ms = 0.5;
    i.win_extra_ms = 0.9;
    i.read_ms = 0.2;
    i.decider =
        Decider::Redis(Cache { connect_us: PLAIN_CONNECT_US, costs: REDIS_COSTS_PLAIN, ..Cache::elasticache(1, 1) });
    i.send_rate = Some(LOCAL_SEND_RATE);
    i.queue_when_busy = true;
    i.tries = 3;
    i
}

/// The red packet measured through the runner with the consumer held (BENCHMARKS section 1, the
/// median round): 30,000 grabs in 9.05 s (3,317/s), grab p50 25.3 ms; beside it, the emulator's raw
/// `SendMessage` rate, 2,277/s.
pub const LOCAL_RED_PACKET_S: f64 = 9.05;
pub const LOCAL_RED_PACKET_P50_MS: f64 = 25.3;
pub const LOCAL_SEND_RATE: f64 = 2_277.0;

/// Medians and ranges of a scenario over seeds.
pub struct Spread {
    pub outcomes: Vec<Outcome>,
}

impl Spread {
    pub fn of(i: &Inputs, seeds: std::ops::Range<u64>) -> Self {
        Spread { outcomes: seeds.map(|s| simulate(i, s)).collect() }
    }

    /// "median (min-max)" of a figure, formatted by `f`.
    fn show(&self, get: impl Fn(&Outcome) -> f64, f: impl Fn(f64) -> String) -> String {
        let mut v: Vec<f64> = self.outcomes.iter().map(get).collect();
        v.sort_by(f64::total_cmp);
        let (lo, mid, hi) = (v[0], v[v.len() / 2], v[v.len() - 1]);
        if f(lo) == f(hi) { f(mid) } else { format!("{} ({}-{})", f(mid), f(lo), f(hi)) }
    }

    pub fn min(&self, get: impl Fn(&Outcome) -> f64) -> f64 {
        self.outcomes.iter().map(get).fold(f64::INFINITY, f64::min)
    }
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

fn secs(s: f64) -> String {
    if s.is_nan() { "not sold out".into() } else { format!("{s:.1} s") }
}

fn row(i: &Inputs, s: &Spread) {
    println!(
        "| {} | {} | {} | {} | {} | {} | {} / {} | {} | {} | {} | {} | {} |",
        i.name,
        fmt(i.users),
        s.show(|o| o.sold_out_s.unwrap_or(f64::NAN), secs),
        s.show(|o| (o.edge_refused + o.throttled) as f64, |v| fmt(v as u64)),
        s.show(|o| o.gave_up as f64, |v| fmt(v as u64)),
        s.show(|o| o.invocations as f64 / o.asked.max(1) as f64 * 100.0, |v| format!("{v:.0}%")),
        s.show(|o| o.grab_p50_ms, |v| format!("{v:.0}")),
        s.show(|o| o.grab_p99_ms, |v| format!("{v:.0}")),
        s.show(|o| o.peak_envs[1] as f64, |v| fmt(v as u64)),
        s.show(|o| o.peak_master_load * 100.0, |v| format!("{v:.0}%")),
        s.show(|o| o.handshakes_per_master as f64, |v| fmt(v as u64)),
        s.show(|o| o.last_mail_s, |v| format!("{v:.0} s")),
        s.show(|o| o.cost_usd, |v| format!("${v:.2}")),
    );
}

fn main() {
    let args = Args::parse();
    let seeds = args.seed..args.seed + args.seeds.max(1);
    let local = Spread::of(&local_red_packet(), seeds.clone());
    println!(
        "open-sim (seeds {}-{}): the local red packet: 30,000 grabs answered in {} (measured {LOCAL_RED_PACKET_S} s), grab p50 {} ms (measured {LOCAL_RED_PACKET_P50_MS} ms), {} grabs/s",
        seeds.start,
        seeds.end - 1,
        local.show(|o| o.last_answer_s, |v| format!("{v:.2} s")),
        local.show(|o| o.grab_p50_ms, |v| format!("{v:.0}")),
        local.show(|o| 30_000.0 / o.last_answer_s, |v| fmt(v as u64)),
    );
    if args.local {
        return;
    }
    println!();
    println!("20,000 tickets, users arriving within 10 s; each cell the median over the seeds (min-max):");
    println!();
    println!(
        "| sale | users | sold out | refused at the gateway or throttled | gave up | requests that ran a function | grab p50 / p99 ms | peak grab environments | busiest master's busiest second | handshakes per master | last mail | Lambda + API + edge |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for users in [30_000, 1_000_000, 10_000_000] {
        let i = template_defaults("template defaults, cold", users, 20_000);
        row(&i, &Spread::of(&i, seeds.clone()));
        let i = warm("warm fleet, quotas raised", users, 20_000);
        row(&i, &Spread::of(&i, seeds.clone()));
    }
    for i in [
        with_edge(template_defaults("template defaults, cold", 1_000_000, 20_000), 1.0),
        with_edge(warm("warm fleet, quotas raised", 1_000_000, 20_000), 1.0),
        with_edge(warm("warm fleet, quotas raised", 1_000_000, 20_000), 0.5),
        managed("Managed Instances (2 x 8 environments of 4 vCPUs), quotas raised", 1_000_000, 20_000, 8),
    ] {
        row(&i, &Spread::of(&i, seeds.clone()));
    }
    for (name, decider) in [
        ("without the sold-out memory", Decider::Redis(Cache { memory: false, ..Cache::elasticache(1, 1) })),
        ("a DynamoDB stock item", Decider::DynamoItem { writes_per_s: PARTITION_WRITES_PER_S }),
        ("the seeds' row lock", Decider::RowLock { rate: ROW_LOCK_PER_S }),
    ] {
        let mut i = warm(&format!("warm: {name}"), 1_000_000, 20_000);
        i.decider = decider;
        row(&i, &Spread::of(&i, seeds.clone()));
    }
    println!();
    println!(
        "One hot event: {} coupons (the most a release accepts), 3,000,000 users within 10 s (faster than any row serves), the gateway at 600,000 requests/s, the cache's buckets each on its own master:",
        fmt(HOT_TICKETS)
    );
    println!();
    println!(
        "| event | grants per second | sold out | grab p50 / p99 ms | gave up | peak environments (verify-hash, grab) | busiest master's busiest second | handshakes per master | connections per master | moved home | Lambda + API |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    // Up to the claim's buckets, and the same buckets warm for less, growing, or from cold.
    let most = u32::from(shared::domain::event::MAX_BUCKETS);
    let around = [4, 8, CLAIM_BUCKETS - 2, CLAIM_BUCKETS, most];
    let mut hot: Vec<Inputs> = around.into_iter().map(|b| hot_event(b, HOT_RATE)).collect();
    hot.push(hot_event(CLAIM_BUCKETS, 50_000));
    let mut uncapped = hot_event(CLAIM_BUCKETS, HOT_RATE);
    uncapped.name = format!("{CLAIM_BUCKETS} buckets, warm for {}/s, growing on demand", fmt(u64::from(HOT_RATE)));
    uncapped.reserved = [None, None];
    uncapped.account_concurrency = 30_000;
    hot.push(uncapped);
    let mut cold = hot_event(CLAIM_BUCKETS, 0);
    cold.name = format!("{CLAIM_BUCKETS} buckets, on demand from cold");
    cold.reserved = [None, None];
    cold.account_concurrency = 30_000;
    hot.push(cold);
    for (share, said) in [(0.1, "a tenth"), (1.0, "all")] {
        let mut dead = hot_event(CLAIM_BUCKETS, HOT_RATE);
        dead.name = format!("{CLAIM_BUCKETS} buckets, warm and capped, {said} of its connections dead at the open");
        dead.remade_at_open = share;
        hot.push(dead);
    }
    hot.extend([CLAIM_MANAGED_BUCKETS - 2, CLAIM_MANAGED_BUCKETS, most].map(hot_managed));
    hot.extend(hot_behind_the_edge());
    for i in &hot {
        let s = Spread::of(i, seeds.clone());
        println!(
            "| {} | {} | {} | {} / {} | {} | {} | {} | {} | {} | {} | {} |",
            i.name,
            s.show(|o| o.grants_per_s, |v| fmt(v as u64)),
            s.show(|o| o.sold_out_s.unwrap_or(f64::NAN), secs),
            s.show(|o| o.grab_p50_ms, |v| format!("{v:.0}")),
            s.show(|o| o.grab_p99_ms, |v| format!("{v:.0}")),
            s.show(|o| o.gave_up as f64, |v| fmt(v as u64)),
            s.show(|o| o.peak_envs[0] as f64, |v| fmt(v as u64))
                + ", "
                + &s.show(|o| o.peak_envs[1] as f64, |v| fmt(v as u64)),
            s.show(|o| o.peak_master_load * 100.0, |v| format!("{v:.0}%")),
            s.show(|o| o.handshakes_per_master as f64, |v| fmt(v as u64)),
            s.show(|o| o.connections_per_master as f64, |v| fmt(v as u64)),
            s.show(|o| o.moved_home as f64, |v| fmt(v as u64)),
            s.show(|o| o.cost_usd, |v| format!("${v:.2}")),
        );
    }
    println!();
    println!(
        "Sensitivity: the hot event on {CLAIM_BUCKETS} buckets, warm for {}/s and capped (the claim's row), and left to grow on demand, with each uncertain input at half and at double (grants per second):",
        fmt(u64::from(HOT_RATE))
    );
    println!();
    println!("| input | as taken | warm and capped: half | double | growing on demand: half | double |");
    println!("|---|---|---|---|---|---|");
    for (input, taken, scale) in sensitivities() {
        let cells: Vec<String> = [0.5, 2.0]
            .into_iter()
            .flat_map(|k| {
                let mut capped = hot_event(CLAIM_BUCKETS, HOT_RATE);
                let mut growing = hot_event(CLAIM_BUCKETS, HOT_RATE);
                growing.reserved = [None, None];
                growing.account_concurrency = 30_000;
                scale(&mut capped, k);
                scale(&mut growing, k);
                [capped, growing]
            })
            .map(|i| Spread::of(&i, seeds.clone()).show(|o| o.grants_per_s, |v| fmt(v as u64)))
            .collect();
        println!("| {input} | {taken} | {} | {} | {} | {} |", cells[0], cells[2], cells[1], cells[3]);
    }
}

/// Each input of the model that is measured here or assumed (not a quota), with what it is taken
/// as and how to scale it.
type Scale = fn(&mut Inputs, f64);
fn sensitivities() -> Vec<(&'static str, String, Scale)> {
    fn costs(i: &mut Inputs, f: impl Fn(&mut RedisCosts)) {
        if let Decider::Redis(cache) = &mut i.decider {
            f(&mut cache.costs);
        }
    }
    vec![
        ("a won grab's Redis CPU (measured)", format!("{} us", REDIS_COSTS.grab_won), |i, k| {
            costs(i, |c| c.grab_won *= k)
        }),
        ("the limiter's Redis CPU (measured)", format!("{} us", REDIS_COSTS.limiter), |i, k| {
            costs(i, |c| c.limiter *= k)
        }),
        ("a new TLS connection's Redis CPU (measured)", format!("{} us", CLUSTER_CONNECT_US), |i, k| {
            if let Decider::Redis(cache) = &mut i.decider {
                cache.connect_us *= k;
            }
        }),
        (
            "a grab's duration (assumed: the handler and a round trip)",
            format!("{} ms", hot_event(CLAIM_BUCKETS, HOT_RATE).grab_ms),
            |i, k| i.grab_ms *= k,
        ),
        (
            "a winner's SendMessage (assumed)",
            format!("{} ms", hot_event(CLAIM_BUCKETS, HOT_RATE).win_extra_ms),
            |i, k| i.win_extra_ms *= k,
        ),
        ("verify-hash's duration (assumed)", format!("{} ms", hot_event(CLAIM_BUCKETS, HOT_RATE).verify_ms), |i, k| {
            i.verify_ms *= k
        }),
        ("a cold start (assumed)", format!("{} ms", hot_event(CLAIM_BUCKETS, HOT_RATE).cold_start_ms), |i, k| {
            i.cold_start_ms *= k
        }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_sale() {
        let i = template_defaults("t", 30_000, 20_000);
        assert_eq!(simulate(&i, 7), simulate(&i, 7));
    }

    /// The model against the local red packet measured through the runner (BENCHMARKS section 1,
    /// the consumer held): the time to answer every grab and the grab's median latency, each within
    /// half again of the measured, at every seed.
    #[test]
    fn the_model_meets_the_local_red_packet_in_time_and_latency() {
        for seed in 1..=5 {
            let o = simulate(&local_red_packet(), seed);
            assert_eq!(o.sold, 20_000, "every packet sold, none twice");
            let time = o.last_answer_s / LOCAL_RED_PACKET_S;
            let p50 = o.grab_p50_ms / LOCAL_RED_PACKET_P50_MS;
            assert!(
                (1.0 / 1.5..=1.5).contains(&time),
                "seed {seed}: {:.2} s against {LOCAL_RED_PACKET_S} s",
                o.last_answer_s
            );
            assert!(
                (1.0 / 1.5..=1.5).contains(&p50),
                "seed {seed}: p50 {} ms against {LOCAL_RED_PACKET_P50_MS} ms",
                o.grab_p50_ms
            );
        }
    }

    /// With the template's defaults verify-hash's reserved environments, 10 requests a second
    /// each, bound the users a second (250: 2,500, what the stage's 5,000 requests admit): the
    /// model holds the cap and throttles past it.
    #[test]
    fn the_template_defaults_let_through_what_verify_hashs_reserved_environments_serve() {
        let reserved = reserved_concurrency("VerifyHashReservedConcurrency");
        let o = simulate(&template_defaults("t", 100_000, 20_000), 1);
        let span_s = 10.0 + 30.0;
        assert!(o.peak_envs[0] as f64 <= reserved, "verify-hash's cap: {}", o.peak_envs[0]);
        assert!(o.throttled > 0, "throttled by Lambda, not only the gateway");
        let per_s = reserved * f64::from(REQUESTS_PER_ENVIRONMENT);
        assert!((o.invocations as f64) < 2.0 * per_s * span_s, "{} invocations", o.invocations);
    }

    /// 100,000 grabs a second on one event the release accepts (`MAX_CAPACITY` coupons), at every
    /// seed, on a cache as deployed (TLS, cluster mode, a replica; each won order kept in its sent
    /// record and confirmed by the replica): [`CLAIM_BUCKETS`] buckets on as many masters and the
    /// warm fleet the product provisions for 120,000/s (10 requests a second per environment),
    /// capped at it; two buckets fewer cannot (each master also counts a share of the users'
    /// verify-hash), nor a fleet on demand from cold (Lambda adds 1,000 environments per 10 s, and
    /// each new one's TLS handshake lands on every master).
    #[test]
    fn a_hundred_thousand_grabs_a_second_takes_buckets_and_a_warm_fleet() {
        let rates = |s: &Spread| s.outcomes.iter().map(|o| o.grants_per_s as u64).collect::<Vec<_>>();
        let claim = Spread::of(&hot_event(CLAIM_BUCKETS, HOT_RATE), 1..4);
        assert!(claim.min(|o| o.grants_per_s) > 100_000.0, "{CLAIM_BUCKETS} buckets, warm: {:?}", rates(&claim));
        let fewer = Spread::of(&hot_event(CLAIM_BUCKETS - 2, HOT_RATE), 1..2);
        assert!(fewer.outcomes.iter().all(|o| o.grants_per_s < 100_000.0), "two buckets fewer: {:?}", rates(&fewer));
        let mut cold = hot_event(CLAIM_BUCKETS, 0);
        cold.reserved = [None, None];
        cold.account_concurrency = 30_000;
        let cold = simulate(&cold, 1);
        assert!(cold.grants_per_s < 100_000.0 && cold.handshakes_per_master > 0, "cold: {:.0}/s", cold.grants_per_s);
    }

    /// The release's `BUCKETS_FOR_RATE` takes a bucket for `GRANTS_PER_BUCKET` grabs a second:
    /// the model grants at least that per bucket from twelve buckets up to the most a release
    /// accepts, at the hot event's rate.
    #[test]
    fn each_bucket_grants_what_the_release_counts_on() {
        use shared::domain::warm_fleet::GRANTS_PER_BUCKET;
        for b in [12, CLAIM_BUCKETS, u32::from(shared::domain::event::MAX_BUCKETS)] {
            let o = simulate(&hot_event(b, HOT_RATE), 1);
            assert!(o.grants_per_s >= f64::from(b * GRANTS_PER_BUCKET), "{b} buckets: {:.0}/s", o.grants_per_s);
        }
    }

    /// A warm fleet whose connections died while it sat frozen connects again at the open, a TLS
    /// handshake on every master per environment: a tenth of the claim's fleet so costs each
    /// master seconds of its core, and the claim (why the fleet is asked no earlier than
    /// `warm_fleet::LEAD`, within the minutes such a connection is reported to live).
    #[test]
    fn a_tenth_of_the_warm_fleet_reconnecting_at_the_open_breaks_the_claim() {
        let mut dead = hot_event(CLAIM_BUCKETS, HOT_RATE);
        dead.remade_at_open = 0.1;
        let o = simulate(&dead, 1);
        assert_eq!(o.handshakes_per_master, (dead.warm[0] + dead.warm[1]) / 10);
        assert!(o.grants_per_s < 100_000.0, "{:.0}/s", o.grants_per_s);
    }

    /// Managed Instances serve the same rate from a few dozen environments, no cold start, no
    /// handshake at the open, and fewer buckets (their pipelined requests cost the masters less).
    #[test]
    fn managed_instances_serve_the_hot_event_from_a_few_environments() {
        let o = simulate(&hot_managed(CLAIM_MANAGED_BUCKETS), 1);
        assert!(o.grants_per_s > 100_000.0, "{:.0}/s", o.grants_per_s);
        assert_eq!(o.handshakes_per_master, 0);
        assert!(o.peak_envs[1] <= 48);
        let fewer = simulate(&hot_managed(CLAIM_MANAGED_BUCKETS - 2), 1);
        assert!(fewer.grants_per_s < 100_000.0, "two buckets fewer: {:.0}/s", fewer.grants_per_s);
    }

    /// Behind CloudFront the distribution's quota counts every request, the state's reads and the
    /// crowd's retries: at its default the claim's row falls below 100,000 a second; raised above
    /// the crowd, it grants what it grants without the edge.
    #[test]
    fn the_edge_needs_its_quota_raised_for_the_hot_event() {
        let [at_default, raised] = hot_behind_the_edge().map(|i| simulate(&i, 1));
        let without = simulate(&hot_event(CLAIM_BUCKETS, HOT_RATE), 1);
        assert!(at_default.grants_per_s < 100_000.0 && at_default.edge_refused > 0, "{:.0}/s", at_default.grants_per_s);
        assert!(
            (raised.grants_per_s - without.grants_per_s).abs() < 0.01 * without.grants_per_s,
            "{:.0}/s against {:.0}/s",
            raised.grants_per_s,
            without.grants_per_s
        );
    }

    /// The edge's state object turns the crowd away once sold out: far fewer requests reach a
    /// function, and nothing sold changes.
    #[test]
    fn the_edge_keeps_the_crowd_after_the_sell_out_from_the_functions() {
        let plain = simulate(&warm("t", 1_000_000, 20_000), 1);
        let edge = simulate(&with_edge(warm("t", 1_000_000, 20_000), 1.0), 1);
        assert_eq!((plain.sold, edge.sold), (20_000, 20_000));
        assert!(edge.edge_answered > 0);
        assert!(
            (edge.invocations as f64) < 0.5 * plain.invocations as f64,
            "{} against {}",
            edge.invocations,
            plain.invocations
        );
    }

    #[test]
    fn nothing_is_sold_twice_and_every_user_is_answered_or_gives_up() {
        for i in [template_defaults("t", 1_000_000, 20_000), warm("t", 1_000_000, 20_000)] {
            let o = simulate(&i, 3);
            assert_eq!(o.sold, 20_000);
            assert!(o.sold_out_s.is_some());
        }
    }
}
