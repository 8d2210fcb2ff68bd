//! fn-costs: what each function binary costs Lambda before and while it serves: cold-start init
//! (exec to its first `GET /runtime/invocation/next` on a Runtime API this program serves), peak
//! RSS after init and after 100 invocations of its sample event, and the binary's size, beside a
//! minimal `lambda_runtime` hello built with the same profile.
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
    /// Cold starts per binary.
    #[arg(long, default_value_t = 15)]
    rounds: usize,
    /// Invocations before the peak RSS is read.
    #[arg(long, default_value_t = 100)]
    invocations: usize,
    /// Write the figures as JSON here too.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// The functions write what their sample events ask into a table of their own.
const BENCH_TABLE: &str = "ticketgrab-fn-costs";

/// (binary, sample event the invocations replay)
const BINARIES: [(&str, &str); 7] = [
    ("hello-lambda", "reconcile-schedule.json"),
    ("release", "release-direct.json"),
    ("query", "query-events.json"),
    ("verify-hash", "verify-hash.json"),
    ("grab", "grab.json"),
    ("mail", "mail-batch.json"),
    ("reconcile", "reconcile-schedule.json"),
];

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

    let path = args.bin_dir.join(binary);
    let started = Instant::now();
    let mut child = tokio::process::Command::new(&path)
        .env("TABLE_NAME", BENCH_TABLE)
        .env("ORDERS_QUEUE_URL", queue)
        .env("AWS_LAMBDA_RUNTIME_API", &api)
        .env("AWS_LAMBDA_FUNCTION_NAME", binary)
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
    let rss_init_kb = peak_rss_kb(pid);
    tokio::time::timeout(Duration::from_secs(60), rt.drained.notified())
        .await
        .map_err(|_| format!("{binary} did not finish {invocations} invocations"))?;
    let rss_after_kb = peak_rss_kb(pid);
    let _ = child.kill().await;
    server.abort();
    Ok(Cold { init, rss_init_kb, rss_after_kb })
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
        "fn-costs: {} cold starts per binary (exec to its first `next`, local Runtime API, no network in init), \
         peak RSS after init and after {} invocations of its sample event",
        args.rounds, args.invocations
    );
    println!(
        "{:<13} {:>10} {:>10} {:>10} {:>9} {:>12} {:>12} {:>10}",
        "binary", "init p50", "init min", "init max", "vs hello", "RSS init", "RSS after", "size"
    );
    let mut hello_init = None;
    let mut rows = Vec::new();
    for (binary, sample) in BINARIES {
        let event = std::fs::read_to_string(events.join(sample))?;
        // The first start warms the page cache; it is not counted.
        cold_start(&args, &queue, binary, &event, 0).await?;
        let mut inits = Vec::new();
        for _ in 0..args.rounds {
            inits.push(cold_start(&args, &queue, binary, &event, 0).await?.init);
        }
        inits.sort();
        let p50 = inits[inits.len() / 2];
        let with_work = cold_start(&args, &queue, binary, &event, args.invocations).await?;
        let size = std::fs::metadata(args.bin_dir.join(binary))?.len();
        if binary == "hello-lambda" {
            hello_init = Some(p50);
        }
        let ratio = hello_init.map(|h| p50.as_secs_f64() / h.as_secs_f64()).unwrap_or(1.0);
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "{:<13} {:>7.2} ms {:>7.2} ms {:>7.2} ms {:>8.2}x {:>9.1} MB {:>9.1} MB {:>7.1} MB",
            binary,
            ms(p50),
            ms(inits[0]),
            ms(inits[inits.len() - 1]),
            ratio,
            with_work.rss_init_kb as f64 / 1024.0,
            with_work.rss_after_kb as f64 / 1024.0,
            size as f64 / 1_048_576.0
        );
        rows.push(serde_json::json!({
            "binary": binary, "init_p50_ms": ms(p50), "init_min_ms": ms(inits[0]),
            "init_max_ms": ms(inits[inits.len() - 1]), "init_vs_hello": ratio,
            "rss_init_kb": with_work.rss_init_kb, "rss_after_kb": with_work.rss_after_kb, "size_bytes": size,
        }));
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&rows)?)?;
    }
    Ok(())
}
