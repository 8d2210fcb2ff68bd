//! fn-costs: what each function binary costs Lambda before and while it serves: cold-start init
//! (exec to its first `GET /runtime/invocation/next` on a Runtime API this program serves), the
//! page faults init took, peak RSS after init and after 100 invocations of its sample event, and
//! the binary's size, beside a minimal `lambda_runtime` hello built with the same profile.
//!
//! The machines are noisy, so each round starts every binary once, in a rotating order, and the
//! ratio to the hello is taken within each round: the median of those ratios and their spread is
//! the figure. With `--callgrind`, init is also counted in instructions under valgrind (the
//! Runtime API closed, so the binary stops at its first request): those counts do not move with
//! the machine's load.
//!
//! `scripts/bench` builds the binaries in release and runs this with the local stack up; the
//! functions get the local settings (`scripts/local.env`) and a table of their own.

use std::{
    path::PathBuf,
    process::Stdio,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{
    Router,
    extract::{Path, State},
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::{get, post},
};
use clap::Parser;
use tokio::sync::Notify;

#[derive(Parser)]
struct Args {
    /// Where the release binaries are.
    #[arg(long, default_value = "target/release")]
    bin_dir: PathBuf,
    /// Rounds; each starts every binary once.
    #[arg(long, default_value_t = 40)]
    rounds: usize,
    /// Invocations before the peak RSS is read.
    #[arg(long, default_value_t = 100)]
    invocations: usize,
    /// Write the figures as JSON here too.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also count each binary's init in instructions under valgrind's callgrind.
    #[arg(long)]
    callgrind: bool,
}

/// The functions write what their sample events ask into a table of their own.
const BENCH_TABLE: &str = "ticketgrab-fn-costs";

/// (binary, sample event the invocations replay). `<binary>@provisioned` starts the binary as a
/// provisioned environment (`AWS_LAMBDA_INITIALIZATION_TYPE`), which connects to the cache in its
/// init (`Adapters::gate_for`): the warm fleet's init, beside the on-demand one.
const BINARIES: [(&str, &str); 9] = [
    ("hello-lambda", "reconcile-schedule.json"),
    ("release", "release-direct.json"),
    ("query", "query-events.json"),
    ("verify-hash", "verify-hash.json"),
    ("grab", "grab.json"),
    ("mail", "mail-batch.json"),
    ("reconcile", "reconcile-schedule.json"),
    ("grab@provisioned", "grab.json"),
    ("verify-hash@provisioned", "verify-hash.json"),
];

/// The binary's file and the initialization type Lambda names for it.
fn file_and_init(binary: &str) -> (&str, &str) {
    match binary.split_once('@') {
        Some((file, "provisioned")) => (file, "provisioned-concurrency"),
        _ => (binary, "on-demand"),
    }
}

/// The Runtime API of one execution environment: hands out `event` `invocations` times, then
/// holds the next request open (the environment is frozen), noting when init ended.
struct Runtime {
    event: String,
    left: Mutex<usize>,
    first_next: Mutex<Option<Instant>>,
    drained: Notify,
    init_seen: Notify,
}

async fn next(State(rt): State<Arc<Runtime>>) -> Response {
    {
        let mut first = rt.first_next.lock().expect("lock");
        if first.is_none() {
            *first = Some(Instant::now());
            rt.init_seen.notify_one();
        }
    }
    let serve = {
        let mut left = rt.left.lock().expect("lock");
        if *left > 0 {
            *left -= 1;
            true
        } else {
            false
        }
    };
    if !serve {
        rt.drained.notify_one();
        std::future::pending::<()>().await;
    }
    let id = uuid::Uuid::now_v7().to_string();
    let deadline = (time::OffsetDateTime::now_utc().unix_timestamp() + 30) * 1000;
    (
        [
            ("lambda-runtime-aws-request-id", id),
            ("lambda-runtime-deadline-ms", deadline.to_string()),
            ("lambda-runtime-invoked-function-arn", "arn:aws:lambda:us-east-1:000000000000:function:bench".into()),
            ("lambda-runtime-trace-id", "Root=1-00000000-000000000000000000000000".into()),
            ("content-type", "application/json".into()),
        ],
        rt.event.clone(),
    )
        .into_response()
}

async fn accepted(Path(_id): Path<String>) -> StatusCode {
    StatusCode::ACCEPTED
}

async fn init_error() -> StatusCode {
    StatusCode::ACCEPTED
}

struct Cold {
    init: Duration,
    /// Minor page faults up to the first `next`: what mapping, relocating and touching cost.
    faults_init: u64,
    rss_init_kb: u64,
    rss_after_kb: u64,
}

async fn cold_start(args: &Args, queue: &str, binary: &str, event: &str, invocations: usize) -> Result<Cold, String> {
    let rt = Arc::new(Runtime {
        event: event.to_owned(),
        left: Mutex::new(invocations),
        first_next: Mutex::new(None),
        drained: Notify::new(),
        init_seen: Notify::new(),
    });
    let app = Router::new()
        .route("/2018-06-01/runtime/invocation/next", get(next))
        .route("/2018-06-01/runtime/invocation/{id}/response", post(accepted))
        .route("/2018-06-01/runtime/invocation/{id}/error", post(accepted))
        .route("/2018-06-01/runtime/init/error", post(init_error))
        .with_state(rt.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let api = listener.local_addr().map_err(|e| e.to_string())?.to_string();
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let (file, init_type) = file_and_init(binary);
    let path = args.bin_dir.join(file);
    let started = Instant::now();
    let mut child = tokio::process::Command::new(&path)
        .env("TABLE_NAME", BENCH_TABLE)
        .env("ORDERS_QUEUE_URL", queue)
        .env("AWS_LAMBDA_RUNTIME_API", &api)
        .env("AWS_LAMBDA_INITIALIZATION_TYPE", init_type)
        .env("AWS_LAMBDA_FUNCTION_NAME", file)
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "bench")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "bench")
        .env("AWS_LAMBDA_LOG_LEVEL", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let pid = child.id().ok_or("no pid")?;
    tokio::time::timeout(Duration::from_secs(10), rt.init_seen.notified())
        .await
        .map_err(|_| format!("{binary} never asked for an invocation"))?;
    let init = rt.first_next.lock().expect("lock").map(|t| t - started).unwrap_or_default();
    let faults_init = minor_faults(pid);
    let rss_init_kb = peak_rss_kb(pid);
    tokio::time::timeout(Duration::from_secs(60), rt.drained.notified())
        .await
        .map_err(|_| format!("{binary} did not finish {invocations} invocations"))?;
    let rss_after_kb = peak_rss_kb(pid);
    let _ = child.kill().await;
    server.abort();
    Ok(Cold { init, faults_init, rss_init_kb, rss_after_kb })
}

/// Minor page faults of a process so far (`/proc/<pid>/stat`, field 10).
fn minor_faults(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            // The command name may hold spaces: count fields after its closing parenthesis.
            let rest = &s[s.rfind(')')? + 1..];
            rest.split_whitespace().nth(7)?.parse().ok()
        })
        .unwrap_or(0)
}

/// Instructions from exec to the first request to the Runtime API, under callgrind: the API's
/// port is closed, so the runtime's first `next` fails and the process ends there.
fn init_instructions(args: &Args, queue: &str, binary: &str) -> Result<u64, String> {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let api = closed.local_addr().map_err(|e| e.to_string())?.to_string();
    drop(closed);
    let (file, init_type) = file_and_init(binary);
    let out = std::env::temp_dir().join(format!("fn-costs-{binary}.callgrind"));
    let run = std::process::Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(args.bin_dir.join(file))
        .env("TABLE_NAME", BENCH_TABLE)
        .env("ORDERS_QUEUE_URL", queue)
        .env("AWS_LAMBDA_RUNTIME_API", &api)
        .env("AWS_LAMBDA_INITIALIZATION_TYPE", init_type)
        .env("AWS_LAMBDA_FUNCTION_NAME", file)
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "bench")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "bench")
        .env("AWS_LAMBDA_LOG_LEVEL", "error")
        .stdout(Stdio::null())
        .output()
        .map_err(|e| format!("valgrind: {e}"))?;
    let _ = std::fs::remove_file(&out);
    let log = String::from_utf8_lossy(&run.stderr);
    log.lines()
        .find_map(|l| l.split("Collected :").nth(1).and_then(|n| n.trim().parse().ok()))
        .ok_or_else(|| format!("{binary}: no instruction count in valgrind's output"))
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// `VmHWM` of a process: its peak resident set so far.
fn peak_rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("VmHWM:").and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            })
        })
        .unwrap_or(0)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let settings = local_runner::LocalSettings::from_env()?;
    let sdk = settings.sdk_config().await;
    local_runner::provision::ensure_table(&aws_sdk_dynamodb::Client::new(&sdk), BENCH_TABLE).await?;
    let (queue, _) = local_runner::provision::ensure_queues(&aws_sdk_sqs::Client::new(&sdk), BENCH_TABLE).await?;
    let events = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../events");
    println!(
        "fn-costs: {} rounds, each starting every binary once in a rotating order (exec to its first `next`, \
         local Runtime API, no network in init); peak RSS after init and after {} invocations of its sample event",
        args.rounds, args.invocations
    );
    let samples: Vec<(&str, String)> = BINARIES
        .iter()
        .map(|(binary, sample)| Ok((*binary, std::fs::read_to_string(events.join(sample))?)))
        .collect::<Result<_, std::io::Error>>()?;
    // The first start of each warms the page cache; it is not counted.
    for (binary, event) in &samples {
        cold_start(&args, &queue, binary, event, 0).await?;
    }
    let mut inits: Vec<Vec<f64>> = vec![Vec::new(); samples.len()];
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); samples.len()];
    let mut faults: Vec<Vec<f64>> = vec![Vec::new(); samples.len()];
    for round in 0..args.rounds {
        let mut this_round = vec![0.0; samples.len()];
        for k in 0..samples.len() {
            let i = (round + k) % samples.len();
            let (binary, event) = &samples[i];
            let cold = cold_start(&args, &queue, binary, event, 0).await?;
            this_round[i] = cold.init.as_secs_f64() * 1000.0;
            faults[i].push(cold.faults_init as f64);
        }
        for i in 0..samples.len() {
            inits[i].push(this_round[i]);
            ratios[i].push(this_round[i] / this_round[0]);
        }
    }
    let instructions: Vec<Option<u64>> = samples
        .iter()
        .map(|(binary, _)| args.callgrind.then(|| init_instructions(&args, &queue, binary)).transpose())
        .collect::<Result<_, _>>()?;
    println!(
        "{:<23} {:>10} {:>16} {:>16} {:>8} {:>12} {:>10} {:>10} {:>9}",
        "binary",
        "init p50",
        "init min-max",
        "vs hello (range)",
        "faults",
        "instructions",
        "RSS init",
        "RSS after",
        "size"
    );
    let mut rows = Vec::new();
    for (i, (binary, event)) in samples.iter().enumerate() {
        let with_work = cold_start(&args, &queue, binary, event, args.invocations).await?;
        let size = std::fs::metadata(args.bin_dir.join(file_and_init(binary).0))?.len();
        let (lo, hi) = inits[i].iter().fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
        let (rlo, rhi) = ratios[i].iter().fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
        let (p50, ratio, fault_p50) = (median(&mut inits[i]), median(&mut ratios[i]), median(&mut faults[i]));
        let counted = instructions[i].map(|n| format!("{:.2}M", n as f64 / 1e6)).unwrap_or_else(|| "-".into());
        println!(
            "{:<23} {:>7.2} ms {:>6.2}-{:<6.2} ms {:>5.2}x ({:.2}-{:.2}) {:>8.0} {:>12} {:>7.1} MB {:>7.1} MB {:>6.1} MB",
            binary,
            p50,
            lo,
            hi,
            ratio,
            rlo,
            rhi,
            fault_p50,
            counted,
            with_work.rss_init_kb as f64 / 1024.0,
            with_work.rss_after_kb as f64 / 1024.0,
            size as f64 / 1_048_576.0
        );
        rows.push(serde_json::json!({
            "binary": binary, "init_p50_ms": p50, "init_min_ms": lo, "init_max_ms": hi,
            "init_vs_hello": ratio, "init_vs_hello_min": rlo, "init_vs_hello_max": rhi,
            "faults_init": fault_p50, "instructions_init": instructions[i],
            "rss_init_kb": with_work.rss_init_kb, "rss_after_kb": with_work.rss_after_kb, "size_bytes": size,
        }));
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&rows)?)?;
    }
    Ok(())
}
