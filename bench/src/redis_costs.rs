//! redis-costs: what each of a sale's Redis operations costs the server, in its own CPU time: the
//! deciding costs of docs/SCALE.md's model (a master's core is one second of CPU a second).
//!
//! Redis servers of the bench's own (plain and TLS ports, an AUTH token, a self-signed RSA-2048
//! certificate made with `openssl`), so nothing else runs on them; a server's CPU is read from
//! `/proc/<pid>/stat` before and after each kind (all its threads; the clock's ticks, 10 ms, are why
//! each kind runs thousands of times). Each kind twice: one request at a time on each of 64
//! connections (a Lambda environment on demand: a connection of its own, one request at a time),
//! and 64 in flight on one connection (many requests per environment, Managed Instances: redis-rs
//! pipelines them, which the server pays less for). Rounds in alternating order, medians:
//!
//! - `grab won`: the product's grab script through the gate (`Gate::grab`), each user winning;
//! - `grab won and kept`: the same, then the order kept in its sent record (`Gate::keep_sent`:
//!   where the server has a replica, its `WAIT` and the server's id with it);
//! - `grab refused`: the same on the sold-out event (what each environment's sold-out memory costs
//!   the master when it starts or renews: one script);
//! - `limiter`: verify-hash's per-user count (`Gate::count_request`, one round trip of three
//!   commands);
//! - `tally`: a grab environment's second of counts on the event's tally (`Gate::add_grab_counts`);
//! - `field read`: one `HGET` of a user's field (the sold-out memory's read, on a replica);
//! - `write` and `write waited`: a `SET`, and a `SET` then a `WAIT` for every replica (only where
//!   replicas answer): what the replicas' confirmation costs the primary, apart;
//! - `connect`, `connect TLS` and `connect cluster`: a new connection as redis-rs makes it (TLS
//!   handshake, `AUTH`, in cluster mode `CLUSTER SLOTS`), one `PING`, closed: what each new
//!   execution environment costs each master it talks to.
//!
//! The operations run three ways, side by side in each round: a server on its own over its plain
//! port, the same over TLS (the gate's own `rediss://` connections, trusting the bench's CA through
//! `SSL_CERT_FILE`, which redis-rs's rustls reads), and as the template deploys ElastiCache: a shard
//! of cluster nodes (a primary with every slot and its replicas, two as the template's `CacheNodes`
//! 3 keeps; replication and the cluster bus over TLS), the gate in cluster mode over TLS, the
//! primary's CPU read. `--server` runs another engine (ElastiCache's Valkey 8.0, built with TLS). The model takes the
//! deployed figures; the local check against this machine's runner, the plain ones.
//!
//! `cargo build --release -p bench --bin redis-costs && target/.../redis-costs [--rounds 3]
//! [--only <kind>]` (`scripts/bench redis-costs`).

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use bench::measure::median;
use clap::Parser;
use futures::{StreamExt, future::BoxFuture};
use serde::Serialize;
use shared::{
    config::{GrabPolicy, UserLimit},
    domain::{Email, EventId, OrderId, UserId, event::epoch_ms, order::MessageHead},
    gate::{Gate, GrabAttempt, GrabOutcome},
};
use time::OffsetDateTime;

#[derive(Parser)]
#[command(about = "Server CPU per Redis operation of a sale, on a redis-server of the bench's own")]
struct Args {
    /// Operations per round and kind (connections: a tenth of it).
    #[arg(long, default_value_t = 20_000)]
    ops: u32,
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    #[arg(long)]
    json: Option<PathBuf>,
    /// Only the kinds whose name holds this (e.g. `Limiter`, `GrabWon`): a quick look at one.
    #[arg(long)]
    only: Option<String>,
    /// The server to run: `redis-server`, or another engine's (ElastiCache's Valkey 8.0: a build
    /// with TLS, `make BUILD_TLS=yes`, then `--server <its src/valkey-server>`).
    #[arg(long, default_value = "redis-server")]
    server: PathBuf,
    /// The deployed shard's replicas: the template's `CacheNodes` less its primary (3: two).
    #[arg(long, default_value_t = 2)]
    replicas: usize,
}

type Failure = Box<dyn std::error::Error + Send + Sync>;

const TOKEN: &str = "redis-costs-token-0123456789";

/// The sharded sold-out event's buckets: the claim's (docs/SCALE.md).
const SHARDED_BUCKETS: u16 = 14;

#[derive(Clone, Copy, PartialEq, Debug, Serialize)]
enum Kind {
    GrabWon,
    /// A won grab and its order kept in its bucket's sent record, as the courier keeps it before
    /// the send (where the server has a replica, the record's `WAIT` and the server's id after it).
    GrabWonKept,
    GrabRefused,
    /// The same on a sold-out event of [`SHARDED_BUCKETS`] buckets: the grab asks its home, then
    /// every sibling in turn (a sold-out memory's start or renewal on the claim's event).
    GrabRefusedSharded,
    Limiter,
    /// A grab environment's second of counts written to the event's tally (`Gate::add_grab_counts`:
    /// an `HINCRBY` per outcome and an `EXPIRE`, one pipeline): every grab environment writes one
    /// a second while it serves.
    Tally,
    FieldRead,
    /// A `PING`: what an idle environment's first request asks a master before its command
    /// (`gate/link.rs`, the idle probe), the whole warm fleet at the open.
    Ping,
    /// A write alone (`SET`), and a write with its replicas' confirmation (`SET`, then `WAIT` for
    /// every replica, one after the other on one connection): what a `WAIT` costs the primary, apart.
    Write,
    WriteWaited,
    /// A write, then its server's replication read and a `WAIT` for every replica, each its own
    /// round trip: what the sold-out memory asks of each of an event's buckets when it starts or
    /// is renewed (`Gate::remember_sold_out`), beyond the refusing script's own write.
    SoldOutCheck,
    Connect,
    ConnectTls,
    /// A new environment's cluster connection over TLS: a connection to the configuration
    /// endpoint's node, `CLUSTER SLOTS`, a connection to each primary (here one), a `PING`.
    ConnectCluster,
}

impl Kind {
    const ALL: [Kind; 14] = [
        Kind::GrabWon,
        Kind::GrabWonKept,
        Kind::GrabRefused,
        Kind::GrabRefusedSharded,
        Kind::Limiter,
        Kind::Tally,
        Kind::FieldRead,
        Kind::Ping,
        Kind::Write,
        Kind::WriteWaited,
        Kind::SoldOutCheck,
        Kind::Connect,
        Kind::ConnectTls,
        Kind::ConnectCluster,
    ];

    fn label(self) -> &'static str {
        match self {
            Kind::GrabWon => "grab won (grab.lua)",
            Kind::GrabWonKept => "grab won and kept (grab.lua, then keep_sent.lua; with replicas, their WAIT)",
            Kind::GrabRefused => "grab refused, sold out (grab.lua: a memory's start or renewal)",
            Kind::GrabRefusedSharded => "grab refused, sold out over 14 buckets (every bucket asked in turn)",
            Kind::Limiter => "limiter (verify-hash's count: INCR, PEXPIRE NX, PTTL)",
            Kind::Tally => "tally (a second's counts: HINCRBY x2, EXPIRE)",
            Kind::FieldRead => "field read (HGET, the sold-out memory's read)",
            Kind::Ping => "an idle connection's probe (PING)",
            Kind::Write => "a write (SET)",
            Kind::WriteWaited => "a write and its replicas' confirmation (SET, then WAIT)",
            Kind::SoldOutCheck => "a write, then a bucket's replication checked (SET, INFO replication, WAIT)",
            Kind::Connect => "new connection, plain (AUTH, PING)",
            Kind::ConnectTls => "new connection, TLS (handshake, AUTH, PING)",
            Kind::ConnectCluster => "new connection, cluster mode, TLS (handshakes, AUTH, CLUSTER SLOTS, PING)",
        }
    }
}

/// Which server and port, and so which transport, the requests take.
#[derive(Clone, Copy, PartialEq, Debug, Serialize)]
enum Transport {
    /// A server on its own, its plain port: the local stack.
    Plain,
    /// The same server's TLS port.
    Tls,
    /// As the template deploys the cache: TLS, cluster mode (each script asks `CLUSTER MYID`), a
    /// replica (each kept order's `WAIT`, and the replication stream, on the primary).
    Deployed,
}

impl Transport {
    fn tls(self) -> bool {
        self != Transport::Plain
    }

    fn label(self) -> &'static str {
        match self {
            Transport::Plain => "plain",
            Transport::Tls => "TLS",
            Transport::Deployed => "as deployed (TLS, cluster, replicas)",
        }
    }
}

/// How the requests reach the server.
#[derive(Clone, Copy, PartialEq, Debug, Serialize)]
enum Mode {
    /// Each on a connection of its own, one at a time (`--concurrency` connections).
    Alone,
    /// All on one connection, `--concurrency` in flight.
    Pipelined,
}

/// Runs `op` for every user on one of the `handles` (a gate, or a connection), as `mode` says: the
/// first alone with all in flight, or each its share one at a time.
async fn drive<'a, H: Sync, R: 'a>(
    users: &'a [UserId],
    gates: &'a [H],
    mode: Mode,
    concurrency: usize,
    op: impl Fn(&'a H, &'a UserId) -> BoxFuture<'a, R> + Copy + 'a,
) -> Vec<R> {
    match mode {
        Mode::Pipelined => {
            futures::stream::iter(users).map(|u| op(&gates[0], u)).buffer_unordered(concurrency).collect().await
        }
        Mode::Alone => {
            let per = users.len().div_ceil(gates.len()).max(1);
            let runs = users.chunks(per).zip(gates).map(|(chunk, gate)| async move {
                let mut out = Vec::with_capacity(chunk.len());
                for u in chunk {
                    out.push(op(gate, u).await);
                }
                out
            });
            futures::future::join_all(runs).await.into_iter().flatten().collect()
        }
    }
}

fn kind_is_connect(kind: Kind) -> bool {
    matches!(kind, Kind::Connect | Kind::ConnectTls | Kind::ConnectCluster)
}

/// The bench's own redis-server.
struct Server {
    child: Child,
    pid: u32,
    port: u16,
    tls_port: u16,
    ca: Vec<u8>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn free_port() -> Result<u16, Failure> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn run(cmd: &mut Command) -> Result<(), Failure> {
    let out = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).output()?;
    if !out.status.success() {
        return Err(format!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(())
}

/// A CA and a server certificate it signs, RSA-2048 (a common server key; ElastiCache does not
/// publish its own), shared by the bench's servers (a replica trusts its primary by the same CA).
struct Certs {
    dir: TempDir,
}

impl Certs {
    fn make() -> Result<Self, Failure> {
        let dir = std::env::temp_dir().join(format!("redis-costs-{}", uuid::Uuid::now_v7().simple()));
        std::fs::create_dir_all(&dir)?;
        let certs = Certs { dir: TempDir(dir) };
        let path = |name: &str| certs.path(name);
        run(Command::new("openssl")
            .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=bench-ca"])
            .arg("-keyout")
            .arg(path("ca.key"))
            .arg("-out")
            .arg(path("ca.crt")))?;
        run(Command::new("openssl")
            .args(["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1"])
            .arg("-keyout")
            .arg(path("server.key"))
            .arg("-out")
            .arg(path("server.csr")))?;
        std::fs::write(path("san.ext"), "subjectAltName=IP:127.0.0.1\n")?;
        run(Command::new("openssl")
            .args(["x509", "-req", "-days", "1", "-CAcreateserial"])
            .arg("-in")
            .arg(path("server.csr"))
            .arg("-CA")
            .arg(path("ca.crt"))
            .arg("-CAkey")
            .arg(path("ca.key"))
            .arg("-out")
            .arg(path("server.crt"))
            .arg("-extfile")
            .arg(path("san.ext")))?;
        Ok(certs)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.0.join(name)
    }
}

/// How a server of the bench's runs.
#[derive(Clone, Copy, PartialEq)]
enum Role {
    /// On its own: no cluster, no replica (the local stack's shape).
    Alone,
    /// A node of a cluster (cluster mode enabled, TLS between nodes and to replicas): ElastiCache's
    /// shape as the template deploys it.
    Node,
}

async fn start_server(certs: &Certs, role: Role, bin: &std::path::Path) -> Result<Server, Failure> {
    let (port, tls_port) = (free_port()?, free_port()?);
    let dir = certs.path(&format!("node-{port}"));
    std::fs::create_dir_all(&dir)?;
    let mut cmd = Command::new(bin);
    cmd.args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--requirepass", TOKEN])
        .args(["--masterauth", TOKEN])
        .args(["--port", &port.to_string(), "--tls-port", &tls_port.to_string(), "--tls-auth-clients", "no"])
        .arg("--tls-cert-file")
        .arg(certs.path("server.crt"))
        .arg("--tls-key-file")
        .arg(certs.path("server.key"))
        .arg("--tls-ca-cert-file")
        .arg(certs.path("ca.crt"))
        .arg("--dir")
        .arg(&dir);
    if role == Role::Node {
        cmd.args(["--cluster-enabled", "yes", "--cluster-port", &free_port()?.to_string()]).args([
            "--cluster-announce-ip",
            "127.0.0.1",
            "--tls-cluster",
            "yes",
            "--tls-replication",
            "yes",
        ]);
    }
    let child = cmd.stdout(Stdio::null()).spawn()?;
    let pid = child.id();
    let ca = std::fs::read(certs.path("ca.crt"))?;
    let server = Server { child, pid, port, tls_port, ca };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match connect(&server, false).await {
            Ok(_) => return Ok(server),
            Err(_) if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(e) => return Err(format!("redis-server did not start: {e}").into()),
        }
    }
}

/// A shard as the template deploys one: a primary holding every slot, and `replicas` replicas of
/// it (the sent records' `WAIT`s and the replication stream to each are the primary's to pay).
async fn start_shard(certs: &Certs, replicas: usize, bin: &std::path::Path) -> Result<(Server, Vec<Server>), Failure> {
    let primary = start_server(certs, Role::Node, bin).await?;
    let mut p = connect(&primary, false).await?;
    let _: () = redis::cmd("CLUSTER").arg("ADDSLOTSRANGE").arg(0).arg(16383).query_async(&mut p).await?;
    let bus: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("cluster-port").query_async(&mut p).await?;
    let id: String = redis::cmd("CLUSTER").arg("MYID").query_async(&mut p).await?;
    let mut started = Vec::new();
    for _ in 0..replicas {
        let replica = start_server(certs, Role::Node, bin).await?;
        let mut r = connect(&replica, false).await?;
        let _: () = redis::cmd("CLUSTER")
            .arg("MEET")
            .arg("127.0.0.1")
            .arg(primary.tls_port)
            .arg(&bus[1])
            .query_async(&mut r)
            .await?;
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut replicating = false;
        loop {
            if !replicating {
                replicating = redis::cmd("CLUSTER").arg("REPLICATE").arg(&id).query_async::<()>(&mut r).await.is_ok();
            }
            let link: String = redis::cmd("INFO").arg("replication").query_async(&mut r).await?;
            let state: String = redis::cmd("CLUSTER").arg("INFO").query_async(&mut p).await?;
            if link.contains("master_link_status:up") && state.contains("cluster_state:ok") {
                break;
            }
            if Instant::now() > deadline {
                return Err("the shard did not form (a primary and its replicas)".into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        started.push(replica);
    }
    Ok((primary, started))
}

/// The server's CPU time so far (user and system, all threads), in microseconds.
fn cpu_us(pid: u32, tick_us: f64) -> Result<f64, Failure> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The fields after the command name (which may hold spaces) in parentheses.
    let rest = &stat[stat.rfind(')').ok_or("a stat line")? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let (utime, stime): (f64, f64) = (fields[11].parse()?, fields[12].parse()?);
    Ok((utime + stime) * tick_us)
}

fn tick_us() -> Result<f64, Failure> {
    let out = Command::new("getconf").arg("CLK_TCK").output()?;
    Ok(1e6 / String::from_utf8(out.stdout)?.trim().parse::<f64>()?)
}

async fn connect(server: &Server, tls: bool) -> Result<redis::aio::MultiplexedConnection, Failure> {
    let client = if tls {
        let url = format!("rediss://:{TOKEN}@127.0.0.1:{}", server.tls_port);
        redis::Client::build_with_tls(
            url,
            redis::TlsCertificates { client_tls: None, root_cert: Some(server.ca.clone()) },
        )?
    } else {
        redis::Client::open(format!("redis://:{TOKEN}@127.0.0.1:{}", server.port))?
    };
    Ok(client.get_multiplexed_async_connection().await?)
}

/// One round of one kind: the server's CPU per operation (us), and operations per second.
async fn measure(
    server: &Server,
    gates: &[Gate],
    (kind, mode, transport): (Kind, Mode, Transport),
    args: &Args,
    round: usize,
) -> Result<(f64, f64), Failure> {
    let tls = transport.tls();
    let gate = &gates[0];
    let tick = tick_us()?;
    let users: Vec<UserId> = (0..args.ops)
        .map(|i| UserId::parse(&format!("r{round}-{kind:?}-{mode:?}-{transport:?}-u{i}")).expect("a user id"))
        .collect();
    let email = Email::parse("fan@example.com")?;
    let policy = GrabPolicy::default();
    // What the kind needs beforehand, outside the measured span.
    let event = match kind {
        Kind::GrabWon | Kind::GrabWonKept | Kind::GrabRefused | Kind::GrabRefusedSharded => {
            let id = EventId::parse(&format!("redis-costs-{}", uuid::Uuid::now_v7().simple()))?;
            let refused = matches!(kind, Kind::GrabRefused | Kind::GrabRefusedSharded);
            let buckets = if kind == Kind::GrabRefusedSharded { SHARDED_BUCKETS } else { 1 };
            let capacity = if refused { u32::from(buckets) } else { args.ops };
            let mut event = bench::sales::open_event(
                id,
                "redis costs",
                capacity,
                OffsetDateTime::now_utc() - time::Duration::minutes(1),
            );
            event.buckets = buckets;
            gate.warm(&event).await?;
            // Sold out: grabs until one is refused (a sharded event's last numbers move home).
            for n in 0..(4 * capacity) {
                if !refused {
                    break;
                }
                let first = UserId::parse(&format!("r{round}-{kind:?}-{transport:?}-{mode:?}-first{n}"))?;
                let order = OrderId::generate();
                let head = MessageHead::new(&order, &event.id, &first, &email, "2026-11-26T00:00:00Z");
                let attempt = GrabAttempt {
                    event: &event.id,
                    user: &first,
                    order_id: &order,
                    head: &head,
                    clock_ms: epoch_ms(OffsetDateTime::now_utc()),
                };
                if matches!(gate.grab(&attempt, policy).await?.outcome, GrabOutcome::SoldOut) {
                    break;
                }
            }
            Some(event)
        }
        Kind::FieldRead => {
            let mut conn = connect(server, tls).await?;
            for chunk in users.chunks(1_000) {
                let mut cmd = redis::cmd("HSET");
                cmd.arg("redis-costs:fields");
                for u in chunk {
                    cmd.arg(format!("={u}")).arg("order");
                }
                let _: () = cmd.query_async(&mut conn).await?;
            }
            None
        }
        _ => None,
    };
    let connections = (args.ops / 10).max(100) as usize;
    // Every connection made before the measured span: the gates' (a PING each), and one of the
    // bench's own per gate for the reads.
    let mut conns = Vec::with_capacity(gates.len());
    for g in gates {
        let _: Option<u64> = g
            .count_request(
                &UserId::parse("warm-up")?,
                "warm-up",
                UserLimit { requests: 1_000_000, window: Duration::from_secs(1) },
            )
            .await?;
        if matches!(kind, Kind::FieldRead | Kind::Ping | Kind::Write | Kind::WriteWaited | Kind::SoldOutCheck) {
            let mut conn = connect(server, tls).await?;
            let _: String = redis::cmd("PING").query_async(&mut conn).await?;
            conns.push(conn);
        }
    }
    let before = cpu_us(server.pid, tick)?;
    let started = Instant::now();
    let done: usize = match kind {
        Kind::GrabWon | Kind::GrabWonKept | Kind::GrabRefused | Kind::GrabRefusedSharded => {
            let event = event.as_ref().expect("an event");
            let (id, email) = (&event.id, &email);
            let outcomes: Vec<Result<GrabOutcome, shared::gate::GateError>> =
                drive(&users, gates, mode, args.concurrency, move |gate, user| {
                    Box::pin(async move {
                        let order = OrderId::generate();
                        let head = MessageHead::new(&order, id, user, email, "2026-11-26T00:00:00Z");
                        let now = epoch_ms(OffsetDateTime::now_utc());
                        let attempt = GrabAttempt { event: id, user, order_id: &order, head: &head, clock_ms: now };
                        let outcome = gate.grab(&attempt, policy).await.map(|g| g.outcome)?;
                        if let (Kind::GrabWonKept, GrabOutcome::Granted { message, generation, .. }) = (kind, &outcome)
                        {
                            let kept = gate.keep_sent(id, user, &order, message, Some(generation)).await?;
                            if !kept.may_send() {
                                return Err(shared::gate::GateError::Protocol(format!("not kept: {kept:?}")));
                            }
                        }
                        Ok(outcome)
                    })
                })
                .await;
            let want = |o: &GrabOutcome| match kind {
                Kind::GrabWon | Kind::GrabWonKept => matches!(o, GrabOutcome::Granted { .. }),
                _ => matches!(o, GrabOutcome::SoldOut),
            };
            if let Some(other) = outcomes.iter().find(|o| !o.as_ref().is_ok_and(want)) {
                return Err(format!("{kind:?}: an unexpected outcome {other:?}").into());
            }
            outcomes.len()
        }
        Kind::Limiter => {
            let limit = UserLimit { requests: 10, window: Duration::from_secs(1) };
            let counted = drive(&users, gates, mode, args.concurrency, move |gate, user| {
                Box::pin(gate.count_request(user, "verify-hash", limit))
            })
            .await;
            counted.into_iter().collect::<Result<Vec<_>, _>>()?.len()
        }
        Kind::Tally => {
            let event = EventId::parse(&format!("redis-costs-tally-{round}"))?;
            let event = &event;
            let written = drive(&users, gates, mode, args.concurrency, move |gate, user| {
                Box::pin(async move {
                    // A second of its own per user (as environments write theirs), two outcomes.
                    let second = i64::try_from(user.as_str().len()).unwrap_or_default() + 1_790_000_000;
                    let codes = [("GRANTED".to_owned(), 3), ("SOLD_OUT".to_owned(), 1)].into_iter().collect();
                    gate.add_grab_counts(event, 0, &[(second, codes)].into_iter().collect()).await
                })
            })
            .await;
            written.into_iter().collect::<Result<Vec<_>, _>>()?.len()
        }
        Kind::FieldRead => {
            let read: Vec<Result<Option<String>, Failure>> =
                drive(&users, &conns, mode, args.concurrency, |conn, user| {
                    Box::pin(async move {
                        let mut conn = conn.clone();
                        Ok(redis::cmd("HGET")
                            .arg("redis-costs:fields")
                            .arg(format!("={user}"))
                            .query_async(&mut conn)
                            .await?)
                    })
                })
                .await;
            let found = read.into_iter().collect::<Result<Vec<_>, _>>()?;
            if found.iter().any(Option::is_none) {
                return Err("a field read found nothing".into());
            }
            found.len()
        }
        Kind::Ping => {
            let pinged: Vec<Result<String, Failure>> = drive(&users, &conns, mode, args.concurrency, |conn, _| {
                Box::pin(async move { Ok(redis::cmd("PING").query_async(&mut conn.clone()).await?) })
            })
            .await;
            pinged.into_iter().collect::<Result<Vec<_>, _>>()?.len()
        }
        Kind::ConnectCluster => {
            let settings = bench::sales::gate_settings(
                &format!("rediss://127.0.0.1:{}", server.tls_port),
                true,
                Some(TOKEN.into()),
            );
            let pings: Vec<Result<String, Failure>> = futures::stream::iter(0..connections)
                .map(|_| {
                    let settings = settings.clone();
                    async move {
                        let mut conn = Gate::new(&settings)?.connection().await?;
                        Ok(redis::cmd("PING").query_async(&mut conn).await?)
                    }
                })
                .buffer_unordered(8)
                .collect()
                .await;
            pings.into_iter().collect::<Result<Vec<_>, _>>()?.len()
        }
        Kind::Write | Kind::WriteWaited | Kind::SoldOutCheck => {
            let (waited, replicas, checked) = (kind != Kind::Write, args.replicas, kind == Kind::SoldOutCheck);
            let wrote: Vec<Result<u32, Failure>> = drive(&users, &conns, mode, args.concurrency, move |conn, user| {
                Box::pin(async move {
                    let mut conn = conn.clone();
                    let _: () =
                        redis::cmd("SET").arg(format!("redis-costs:w:{user}")).arg("x").query_async(&mut conn).await?;
                    if !waited {
                        return Ok(0);
                    }
                    if checked {
                        let _: String = redis::cmd("INFO").arg("replication").query_async(&mut conn).await?;
                    }
                    Ok(redis::cmd("WAIT").arg(replicas).arg(100).query_async(&mut conn).await?)
                })
            })
            .await;
            let acked = wrote.into_iter().collect::<Result<Vec<_>, _>>()?;
            // Where there are replicas, every write was confirmed by each (or timed out: not a cost).
            if waited && acked.iter().any(|&n| (n as usize) < replicas) {
                return Err("a WAIT timed out: a replica is not keeping up".into());
            }
            acked.len()
        }
        Kind::Connect | Kind::ConnectTls => {
            let tls = kind == Kind::ConnectTls;
            // Eight at a time: environments starting together, not one client's burst.
            let pings: Vec<Result<String, Failure>> = futures::stream::iter(0..connections)
                .map(|_| async move {
                    let mut conn = connect(server, tls).await?;
                    Ok(redis::cmd("PING").query_async(&mut conn).await?)
                })
                .buffer_unordered(8)
                .collect()
                .await;
            pings.into_iter().collect::<Result<Vec<_>, _>>()?.len()
        }
    };
    let elapsed = started.elapsed().as_secs_f64();
    let used = cpu_us(server.pid, tick)? - before;
    if let Some(event) = event {
        let mut conn = gate.connection().await?;
        for key in shared::gate::keys::cache(&event.id) {
            let _: () = redis::cmd("DEL").arg(key).query_async(&mut conn).await?;
        }
    }
    Ok((used / done as f64, done as f64 / elapsed))
}

#[derive(Serialize)]
struct Row {
    kind: Kind,
    mode: Mode,
    transport: Transport,
    label: &'static str,
    server_us: f64,
    spread: (f64, f64),
    per_second: f64,
}

#[tokio::main]
async fn main() -> Result<(), Failure> {
    let args = Args::parse();
    // The process's TLS provider (rustls, aws-lc-rs), as the functions install it.
    let _ = local_runner::client::builder();
    let certs = Certs::make()?;
    // The gate's TLS connections trust the bench's CA (redis-rs reads the roots through
    // rustls-native-certs, which honours SSL_CERT_FILE), before any connection is made.
    // SAFETY: set once, before any other thread of this process reads the environment.
    unsafe { std::env::set_var("SSL_CERT_FILE", certs.path("ca.crt")) };
    let server = start_server(&certs, Role::Alone, &args.server).await?;
    let (primary, _replicas) = start_shard(&certs, args.replicas, &args.server).await?;
    let engine = Command::new(&args.server).arg("--version").output()?;
    let engine = String::from_utf8_lossy(&engine.stdout);
    let engine = engine.split_whitespace().take(3).collect::<Vec<_>>().join(" ");
    let gates_of = |url: String, cluster: bool| -> Result<Vec<Gate>, Failure> {
        let settings = bench::sales::gate_settings(&url, cluster, Some(TOKEN.into()));
        // A gate (and its connection) per connection of `Mode::Alone`; the first serves `Pipelined`.
        Ok((0..args.concurrency.max(1)).map(|_| Gate::new(&settings)).collect::<Result<_, _>>()?)
    };
    let plain = gates_of(format!("redis://127.0.0.1:{}", server.port), false)?;
    let tls = gates_of(format!("rediss://127.0.0.1:{}", server.tls_port), false)?;
    let deployed = gates_of(format!("rediss://127.0.0.1:{}", primary.tls_port), true)?;
    // The connections' kinds make new connections: the mode and transport are theirs alone.
    let plan: Vec<(Kind, Mode, Transport)> = Kind::ALL
        .iter()
        .flat_map(|&k| match k {
            Kind::Connect | Kind::ConnectTls => vec![(k, Mode::Alone, Transport::Plain)],
            Kind::ConnectCluster => vec![(k, Mode::Alone, Transport::Deployed)],
            // Only a server with a replica answers a `WAIT` before its timeout.
            Kind::WriteWaited | Kind::SoldOutCheck => {
                vec![(k, Mode::Alone, Transport::Deployed), (k, Mode::Pipelined, Transport::Deployed)]
            }
            _ => [Transport::Plain, Transport::Tls, Transport::Deployed]
                .into_iter()
                .flat_map(|t| [(k, Mode::Alone, t), (k, Mode::Pipelined, t)])
                .collect(),
        })
        .filter(|(k, ..)| args.only.as_ref().is_none_or(|only| format!("{k:?}").contains(only.as_str())))
        .collect();
    let mut samples: Vec<Vec<(f64, f64)>> = vec![Vec::new(); plan.len()];
    for round in 0..args.rounds {
        // Alternating order: the machine's drift falls on every kind alike.
        let order: Vec<usize> =
            if round % 2 == 0 { (0..plan.len()).collect() } else { (0..plan.len()).rev().collect() };
        for k in order {
            let (kind, mode, transport) = plan[k];
            let (gates, on) = match transport {
                Transport::Plain => (&plain, &server),
                Transport::Tls => (&tls, &server),
                Transport::Deployed => (&deployed, &primary),
            };
            let (us, rate) = measure(on, gates, plan[k], &args, round).await?;
            eprintln!(
                "round {}: {} ({mode:?}, {transport:?}): {us:.1} us of server CPU each, {rate:.0}/s",
                round + 1,
                kind.label()
            );
            samples[k].push((us, rate));
        }
    }
    let rows: Vec<Row> = plan
        .iter()
        .zip(&samples)
        .map(|(&(kind, mode, transport), s)| Row {
            kind,
            mode,
            transport,
            label: kind.label(),
            server_us: median(s.iter().map(|x| x.0).collect()),
            spread: s.iter().fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(x.0), hi.max(x.0))),
            per_second: median(s.iter().map(|x| x.1).collect()),
        })
        .collect();
    println!(
        "redis-costs: {engine}, as deployed with {} replicas; {} ops per kind (connections {}), {} rounds; server CPU per operation, median (spread)",
        args.replicas,
        args.ops,
        (args.ops / 10).max(100),
        args.rounds,
    );
    println!();
    println!(
        "| operation | transport | one at a time on each of {n} connections (on demand): us | vs a won grab | a core's ceiling | {n} in flight on one connection (many per environment): us | vs a won grab | against plain (on demand, in flight) |",
        n = args.concurrency
    );
    println!("|---|---|---|---|---|---|---|---|");
    let find = |kind: Kind, mode: Mode, t: Transport| {
        rows.iter().find(|r| r.kind == kind && r.mode == mode && (r.transport == t || kind_is_connect(kind)))
    };
    let won = |mode: Mode, t: Transport| find(Kind::GrabWon, mode, t).map_or(f64::NAN, |r| r.server_us);
    let cell = |r: &Row| format!("{:.1} ({:.1}-{:.1})", r.server_us, r.spread.0, r.spread.1);
    for kind in Kind::ALL {
        for t in [Transport::Plain, Transport::Tls, Transport::Deployed] {
            // A connection's kind is measured once, on the transport it names.
            if kind_is_connect(kind) && t != Transport::Plain {
                continue;
            }
            let Some(alone) = find(kind, Mode::Alone, t) else { continue };
            let (piped, piped_ratio) = match find(kind, Mode::Pipelined, t) {
                Some(p) => (cell(p), format!("{:.2}x", p.server_us / won(Mode::Pipelined, t))),
                None => ("-".into(), "-".into()),
            };
            let versus =
                match (find(kind, Mode::Alone, Transport::Plain), find(kind, Mode::Pipelined, Transport::Plain)) {
                    (Some(a), Some(p)) if t != Transport::Plain && !kind_is_connect(kind) => format!(
                        "{:.2}x, {:.2}x",
                        alone.server_us / a.server_us,
                        find(kind, Mode::Pipelined, t).map_or(f64::NAN, |q| q.server_us / p.server_us)
                    ),
                    _ => "-".into(),
                };
            println!(
                "| {} | {} | {} | {:.2}x | {:.0}/s | {} | {} | {} |",
                kind.label(),
                if kind_is_connect(kind) { "-" } else { t.label() },
                cell(alone),
                alone.server_us / won(Mode::Alone, alone.transport),
                1e6 / alone.server_us,
                piped,
                piped_ratio,
                versus
            );
        }
    }
    // What an idle connection holds on the server: the warm fleet keeps one per environment on
    // every master (26,400 at the model's hot event), idle between requests.
    println!();
    for tls in [false, true] {
        let held = (args.ops / 10).max(100) as usize;
        let (allocator, rss) = idle_memory(&server, tls, held).await?;
        println!(
            "idle connection, {}: {allocator:.1} KiB each by the server's own count (used_memory), {rss:.1} KiB each by its RSS ({held} held)",
            if tls { "TLS" } else { "plain" },
        );
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&rows)?)?;
    }
    Ok(())
}

/// The server's memory for `n` idle connections (each authenticated and asked one `PING`): KiB
/// per connection by `INFO memory`'s `used_memory` (the server's own allocator), and by its RSS
/// (which also holds what the TLS library allocates outside that count, and pages the allocator
/// keeps), each before and after.
async fn idle_memory(server: &Server, tls: bool, n: usize) -> Result<(f64, f64), Failure> {
    let mut probe = connect(server, false).await?;
    let used = |info: &str, field: &str| -> f64 {
        info.lines()
            .find_map(|l| l.strip_prefix(field).and_then(|v| v.strip_prefix(':')))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let rss = || -> Result<f64, Failure> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid))?;
        Ok(status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .unwrap_or(0.0)
            * 1024.0)
    };
    let info: String = redis::cmd("INFO").arg("memory").query_async(&mut probe).await?;
    let (before_used, before_rss) = (used(&info, "used_memory"), rss()?);
    let mut held = Vec::with_capacity(n);
    for _ in 0..n {
        let mut conn = connect(server, tls).await?;
        let _: String = redis::cmd("PING").query_async(&mut conn).await?;
        held.push(conn);
    }
    let info: String = redis::cmd("INFO").arg("memory").query_async(&mut probe).await?;
    let (used_grown, rss_grown) = (used(&info, "used_memory") - before_used, rss()? - before_rss);
    drop(held);
    let per = |bytes: f64| bytes / n as f64 / 1024.0;
    Ok((per(used_grown), per(rss_grown)))
}
