//! The grab binary under a mock of Lambda's Runtime API, as Lambda Managed Instances run it: with
//! `AWS_LAMBDA_MAX_CONCURRENCY` set, that many workers poll for invocations at once and each
//! invocation is answered exactly once; without it, one at a time, as an on-demand environment.
//! The sample event's hash is not valid, so each answer is grab's `403 BAD_HASH`, decided before
//! Redis: what is tested is the runtime's plumbing (`shared::http::lambda::run`), which every HTTP
//! function's `main` shares. Needs the local settings (`scripts/local.env`): the binary starts as a
//! deployed one would.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    Router,
    body::Bytes,
    extract::{Path, State},
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::{get, post},
};

/// The Runtime API of one execution environment: `invocations` handed out once `workers` polls
/// are waiting together (so a concurrent runtime shows all its workers first), then every later
/// poll held open.
struct RuntimeApi {
    workers: usize,
    left: Mutex<Vec<String>>,
    polls: Mutex<Polls>,
    all_polling: tokio::sync::Notify,
    answers: Mutex<HashMap<String, Vec<serde_json::Value>>>,
    answered: tokio::sync::Notify,
}

#[derive(Default)]
struct Polls {
    waiting: usize,
    most_waiting: usize,
    /// Every worker has polled at once: from then on, invocations go out as asked.
    started: bool,
}

async fn next(State(api): State<Arc<RuntimeApi>>) -> Response {
    let notified = api.all_polling.notified();
    tokio::pin!(notified);
    // Registered before the count is read: a wake-up between the two is not lost.
    notified.as_mut().enable();
    let go = {
        let mut polls = api.polls.lock().unwrap();
        polls.waiting += 1;
        polls.most_waiting = polls.most_waiting.max(polls.waiting);
        polls.started |= polls.waiting >= api.workers;
        polls.started
    };
    if go {
        api.all_polling.notify_waiters();
    } else {
        // The first polls wait (at most 5 s) for the others, as an idle environment's workers do.
        let _ = tokio::time::timeout(Duration::from_secs(5), notified).await;
    }
    api.polls.lock().unwrap().waiting -= 1;
    let Some(id) = api.left.lock().unwrap().pop() else {
        return std::future::pending().await;
    };
    let event = include_str!("../../../events/grab.json");
    let deadline = (time::OffsetDateTime::now_utc().unix_timestamp() + 30) * 1000;
    (
        [
            ("lambda-runtime-aws-request-id", id),
            ("lambda-runtime-deadline-ms", deadline.to_string()),
            ("lambda-runtime-invoked-function-arn", "arn:aws:lambda:us-east-1:000000000000:function:grab".into()),
            ("content-type", "application/json".into()),
        ],
        event,
    )
        .into_response()
}

async fn response(State(api): State<Arc<RuntimeApi>>, Path(id): Path<String>, body: Bytes) -> StatusCode {
    let body = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    api.answers.lock().unwrap().entry(id).or_default().push(body);
    api.answered.notify_waiters();
    StatusCode::ACCEPTED
}

/// Runs the grab binary on a Runtime API handing out `invocations`; returns how many polls were
/// waiting at once at most, and each invocation's answers.
async fn serve(max_concurrency: Option<usize>, invocations: usize) -> (usize, HashMap<String, Vec<serde_json::Value>>) {
    let api = Arc::new(RuntimeApi {
        workers: max_concurrency.unwrap_or(1),
        left: Mutex::new((0..invocations).map(|i| format!("invocation-{i}")).collect()),
        polls: Mutex::default(),
        all_polling: tokio::sync::Notify::new(),
        answers: Mutex::new(HashMap::new()),
        answered: tokio::sync::Notify::new(),
    });
    let app = Router::new()
        .route("/2018-06-01/runtime/invocation/next", get(next))
        .route("/2018-06-01/runtime/invocation/{id}/response", post(response))
        .route("/2018-06-01/runtime/invocation/{id}/error", post(response))
        .with_state(api.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let mut grab = tokio::process::Command::new(env!("CARGO_BIN_EXE_grab"));
    grab.env("AWS_LAMBDA_RUNTIME_API", &address)
        .env("AWS_LAMBDA_FUNCTION_NAME", "grab")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_LEVEL", "error")
        .env("ORDERS_QUEUE_URL", "http://127.0.0.1:1/queue/unused")
        .env_remove("AWS_LAMBDA_MAX_CONCURRENCY")
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true);
    if let Some(n) = max_concurrency {
        grab.env("AWS_LAMBDA_MAX_CONCURRENCY", n.to_string());
    }
    let mut child = grab.spawn().expect("the grab binary");
    let all_answered = async {
        loop {
            let notified = api.answered.notified();
            if api.answers.lock().unwrap().values().map(Vec::len).sum::<usize>() >= invocations {
                break;
            }
            notified.await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), all_answered).await.expect("every invocation answered");
    // A moment for a second answer to any of them, which would be a defect.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let _ = child.kill().await;
    server.abort();
    let most = api.polls.lock().unwrap().most_waiting;
    let answers = api.answers.lock().unwrap().clone();
    (most, answers)
}

fn assert_each_answered_once(answers: &HashMap<String, Vec<serde_json::Value>>, invocations: usize) {
    assert_eq!(answers.len(), invocations, "{answers:?}");
    for (id, bodies) in answers {
        assert_eq!(bodies.len(), 1, "{id} answered {} times", bodies.len());
        assert_eq!(bodies[0]["statusCode"], 403, "{id}: {}", bodies[0]);
        let body: serde_json::Value = serde_json::from_str(bodies[0]["body"].as_str().unwrap()).unwrap();
        assert_eq!(body["code"], "BAD_HASH", "{id}: {body}");
    }
}

#[tokio::test]
async fn on_managed_instances_every_worker_polls_at_once_and_each_invocation_is_answered_once() {
    let (most, answers) = serve(Some(8), 40).await;
    assert_eq!(most, 8, "eight workers polling together");
    assert_each_answered_once(&answers, 40);
}

#[tokio::test]
async fn on_demand_one_invocation_at_a_time() {
    let (most, answers) = serve(None, 10).await;
    assert_eq!(most, 1, "one poll at a time");
    assert_each_answered_once(&answers, 10);
}
