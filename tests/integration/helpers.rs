//! The test harness: real redis-server and MiniStack (started by `scripts/stack start`, which
//! `scripts/test` runs), a fresh event id per test and, where a test counts messages, a queue of
//! its own, so tests run in parallel without seeing each other.

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use aws_lambda_events::{apigw::ApiGatewayV2httpRequest, sqs::SqsEvent};
use local_runner::{Functions, LocalSettings, provision};
use serde_json::{Value, json};
use shared::{
    config::GrabPolicy,
    domain::{Event, EventId, UserId, event::epoch_ms},
    http::{apigw, routes::Function},
};
use time::OffsetDateTime;
use tokio::sync::OnceCell;

static PROVISIONED: OnceCell<String> = OnceCell::const_new();

pub struct TestApp {
    pub settings: LocalSettings,
    pub functions: Functions,
    pub redis: shared::gate::Connection,
    pub sqs: aws_sdk_sqs::Client,
    pub queue_url: String,
    pub sdk: aws_config::SdkConfig,
}

/// A reply as a client sees it.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub content_type: String,
    pub cache_control: String,
    pub retry_after: Option<String>,
    pub body: Value,
}

impl Reply {
    pub fn code(&self) -> &str {
        self.body["code"].as_str().unwrap_or("")
    }
}

impl TestApp {
    /// A consumer test: its own queue (redelivery after `visibility` seconds), its own table and its
    /// own verified sender, so the orders and mail it counts are its own.
    pub async fn for_mail(visibility: u32) -> Self {
        Self::for_mail_with(visibility, |_| {}).await
    }

    /// [`Self::for_mail`] with settings of the test's own (another Redis, shorter waits).
    pub async fn for_mail_with(visibility: u32, adjust: impl FnOnce(&mut LocalSettings)) -> Self {
        let mut app = Self::build(GrabPolicy::default(), true).await;
        adjust(&mut app.settings);
        let (queue_url, _) =
            provision::ensure_queues_with(&app.sqs, &format!("m-{}", uuid::Uuid::now_v7().simple()), visibility)
                .await
                .expect("test queue");
        app.queue_url = queue_url;
        // A table of its own too: reconcile walks every event of its table, and must not re-drive or
        // rebuild the events of tests running beside this one.
        app.settings.store.table_name = format!("t-{}", uuid::Uuid::now_v7().simple());
        provision::ensure_table(&aws_sdk_dynamodb::Client::new(&app.sdk), &app.settings.store.table_name)
            .await
            .expect("test table");
        app.settings.mail.from = format!("tickets-{}@example.com", uuid::Uuid::now_v7().simple());
        app.ses()
            .create_email_identity()
            .email_identity(&app.settings.mail.from)
            .send()
            .await
            .expect("sender identity");
        app.functions = Functions::build(&app.settings, &app.queue_url).await.expect("functions");
        app.redis = app.functions.gate.connection().await.expect("redis");
        app
    }

    pub fn ses(&self) -> aws_sdk_sesv2::Client {
        aws_sdk_sesv2::Client::new(&self.sdk)
    }

    /// The mail this test's sender sent.
    pub async fn sent_mail(&self) -> Vec<local_runner::mailbox::SentMail> {
        let mut sent = local_runner::mailbox::sent(&self.settings.aws_endpoint).await.expect("read sent mail");
        sent.retain(|m| m.source == self.settings.mail.from);
        sent
    }

    /// The default grab policy and the shared orders queue.
    pub async fn new() -> Self {
        Self::build(LocalSettings::from_env().expect("settings").policy, false).await
    }

    /// The default settings against an emulator of the test's own (`crate::private_emulator`),
    /// provisioned as the runner provisions the stack's, its calls allowed `patience` times the
    /// functions' SDK timeouts (a test of a reply's size, not of the emulator's speed).
    pub async fn on_emulator(url: &str, patience: u32) -> Self {
        let mut settings = LocalSettings::from_env().expect("settings");
        settings.aws_endpoint = url.to_owned();
        let sdk = settings.sdk_config().await;
        let timeouts = sdk.timeout_config().expect("the functions' SDK timeouts");
        let patient = aws_config::timeout::TimeoutConfig::builder()
            .connect_timeout(timeouts.connect_timeout().expect("a connect timeout"))
            .operation_attempt_timeout(timeouts.operation_attempt_timeout().expect("an attempt timeout") * patience)
            .operation_timeout(timeouts.operation_timeout().expect("an operation timeout") * patience)
            .build();
        let sdk = sdk.to_builder().timeout_config(patient).build();
        let queue_url = provision::all(&sdk, &settings.store.table_name, &settings.queue_name, &settings.mail.from)
            .await
            .expect("provision the private emulator")
            .queue_url;
        let sqs = aws_sdk_sqs::Client::new(&sdk);
        let functions = Functions::build_on(&settings, &queue_url, sdk.clone()).await.expect("functions");
        let redis = functions.gate.connection().await.expect("redis");
        Self { settings, functions, redis, sqs, queue_url, sdk }
    }

    /// A custom grab policy and, with `own_queue`, a queue only this test sends to.
    pub async fn build(policy: GrabPolicy, own_queue: bool) -> Self {
        let mut settings = LocalSettings::from_env().expect("settings");
        settings.policy = policy;
        assert!(
            local_runner::stack::is_up(&settings).await,
            "the local stack is not running: start it with `scripts/stack start` (scripts/test does this)"
        );
        let sdk = settings.sdk_config().await;
        let shared_queue = PROVISIONED
            .get_or_init(|| async {
                provision::all(&sdk, &settings.store.table_name, &settings.queue_name, &settings.mail.from)
                    .await
                    .expect("provision the local stack")
                    .queue_url
            })
            .await
            .clone();
        let sqs = aws_sdk_sqs::Client::new(&sdk);
        let queue_url = if own_queue {
            let name = format!("t-{}", uuid::Uuid::now_v7().simple());
            provision::ensure_queues(&sqs, &name).await.expect("test queue").0
        } else {
            shared_queue
        };
        let functions = Functions::build(&settings, &queue_url).await.expect("functions");
        let redis = functions.gate.connection().await.expect("redis");
        Self { settings, functions, redis, sqs, queue_url, sdk }
    }

    /// Calls a function with an HTTP API event, as Lambda (or the runner) would.
    pub async fn call(&self, function: Function, event: Value) -> Reply {
        call_with(&self.functions, function, event).await
    }

    /// A grab event for `user` with a valid hash.
    pub fn grab_event(&self, event: &EventId, user: &str) -> Value {
        let body = json!({ "hash": self.hash_for(event, user) });
        for_user(with_body(for_event(fixture("grab.json"), event), &body), user)
    }
}

/// Calls a function of a given set (e.g. one built against a broken dependency).
pub async fn call_with(functions: &Functions, function: Function, event: Value) -> Reply {
    {
        let event: ApiGatewayV2httpRequest = serde_json::from_value(event).expect("a valid HTTP API event");
        let response = functions.call(function, apigw::into_request(event)).await;
        let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let (content_type, cache_control, retry_after) =
            (header("content-type"), header("cache-control"), header("retry-after"));
        let status = response.status().as_u16();
        let body: &[u8] = response.body().as_ref();
        let body = if body.is_empty() {
            Value::Null
        } else if content_type.as_deref().is_some_and(|t| t.starts_with("text/csv")) {
            Value::String(String::from_utf8(body.to_vec()).expect("CSV is UTF-8"))
        } else {
            serde_json::from_slice(body).expect("every other reply is JSON")
        };
        Reply {
            status,
            content_type: content_type.unwrap_or_default(),
            cache_control: cache_control.unwrap_or_default(),
            retry_after,
            body,
        }
    }
}

impl TestApp {
    /// Stores and warms an event without the release rules, so tests can make windows in the past.
    pub async fn put_event(&self, capacity: u32, start: OffsetDateTime, end: OffsetDateTime) -> EventId {
        let event = test_event(fresh_event_id(), capacity, start, end);
        self.functions.store.put_event(&event).await.expect("put event");
        self.functions.gate.warm(&event).await.expect("warm event");
        event.id
    }

    /// The courier the functions send orders with, on their queue and with their seal keys.
    pub fn courier(&self) -> shared::delivery::Courier {
        shared::delivery::Courier::new(
            self.functions.gate.clone(),
            self.functions.queue.clone(),
            self.settings.seal_keys(),
        )
    }

    /// What Redis holds for the event, read with raw commands (docs/DESIGN.md section 6).
    pub async fn cache(&self, event: &EventId) -> Cache {
        Cache::read(&self.redis, event).await
    }

    /// An event whose sale is open now, for an hour.
    pub async fn open_event(&self, capacity: u32) -> EventId {
        let now = OffsetDateTime::now_utc();
        self.put_event(capacity, now - time::Duration::minutes(1), now + time::Duration::hours(1)).await
    }

    pub fn hash_for(&self, event: &EventId, user: &str) -> String {
        let expires = epoch_ms(OffsetDateTime::now_utc() + time::Duration::minutes(10));
        self.settings.hash.keys.last().expect("the hash keys").current.issue(
            event,
            &UserId::parse(user).unwrap(),
            expires,
        )
    }

    /// A grab by `user` through the grab handler, with a valid hash.
    pub async fn grab(&self, event: &EventId, user: &str) -> Reply {
        let body = json!({ "hash": self.hash_for(event, user) });
        self.call(Function::Grab, for_user(with_body(for_event(fixture("grab.json"), event), &body), user)).await
    }

    /// Every message on this test's queue, received and deleted, as parsed JSON.
    pub async fn drain_queue(&self) -> Vec<Value> {
        self.drain_queue_raw().await.iter().map(|b| serde_json::from_str(b).expect("message body is JSON")).collect()
    }

    /// Every distinct message body on this test's queue, received and deleted, exactly as sent, in
    /// the order received. Distinct: grab's send gives up an attempt after 700 ms and tries again,
    /// so on a loaded machine one send can land twice (consumers are idempotent, docs/DESIGN.md section 7).
    pub async fn drain_queue_raw(&self) -> Vec<String> {
        let mut bodies = Vec::new();
        loop {
            let out = self
                .sqs
                .receive_message()
                .queue_url(&self.queue_url)
                .max_number_of_messages(10)
                .wait_time_seconds(0)
                .send()
                .await
                .expect("receive");
            let messages = out.messages.unwrap_or_default();
            if messages.is_empty() {
                return bodies;
            }
            for m in messages {
                let body = m.body().unwrap_or_default().to_owned();
                if !bodies.contains(&body) {
                    bodies.push(body);
                }
                self.sqs
                    .delete_message()
                    .queue_url(&self.queue_url)
                    .receipt_handle(m.receipt_handle().unwrap_or_default())
                    .send()
                    .await
                    .expect("delete");
            }
        }
    }
}

/// A test lecture with the given id, capacity and sale window.
/// One event's cache as Redis holds it, split by meaning: the meta hash's own fields, the users'
/// holdings and rate counters (the `=<user>` fields), the free numbers and the outbox.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Cache {
    pub meta: BTreeMap<String, String>,
    /// user -> (order id, ticket number)
    pub holdings: BTreeMap<String, (String, u32)>,
    /// user -> `#<window start ms>:<count>`
    pub counters: BTreeMap<String, String>,
    /// user -> the order they cancelled (`!<order id>`)
    pub cancelled: BTreeMap<String, String>,
    pub seats: Vec<u32>,
    /// order id -> order message
    pub outbox: BTreeMap<String, String>,
    /// move id -> a sharded event's numbers on their way from this bucket to another
    pub moving: BTreeMap<String, String>,
}

impl Cache {
    pub async fn read(redis: &shared::gate::Connection, event: &impl shared::gate::keys::HashTag) -> Self {
        use redis::AsyncCommands;
        use shared::gate::keys;
        let mut r = redis.clone();
        let meta: BTreeMap<String, String> = r.hgetall(keys::meta(event)).await.expect("meta");
        let mut cache = Cache {
            seats: r.lrange(keys::seats(event), 0, -1).await.expect("seats"),
            outbox: r.hgetall(keys::outbox(event)).await.expect("outbox"),
            moving: r.hgetall(keys::moving(event)).await.expect("moving"),
            ..Cache::default()
        };
        for (field, value) in meta {
            match field.strip_prefix('=') {
                None => _ = cache.meta.insert(field, value),
                Some(user) if value.starts_with('#') => _ = cache.counters.insert(user.to_owned(), value),
                Some(user) if value.starts_with('!') => {
                    _ = cache.cancelled.insert(user.to_owned(), value[1..].to_owned())
                }
                Some(user) => {
                    let (order, ticket) = value.split_once(':').expect("a holding is <order>:<ticket>");
                    let ticket = ticket.parse().expect("a ticket number");
                    cache.holdings.insert(user.to_owned(), (order.to_owned(), ticket));
                }
            }
        }
        cache
    }

    /// Everything but the rate counters: what a refused grab must leave as it was.
    pub fn without_counters(mut self) -> Self {
        self.counters.clear();
        self
    }

    /// Ticket numbers held, sorted.
    pub fn held(&self) -> Vec<u32> {
        let mut held: Vec<u32> = self.holdings.values().map(|(_, t)| *t).collect();
        held.sort_unstable();
        held
    }
}

pub fn test_event(id: EventId, capacity: u32, start: OffsetDateTime, end: OffsetDateTime) -> Event {
    Event {
        id,
        title: "Test lecture".into(),
        capacity,
        sale_start: start,
        sale_end: end,
        venue: None,
        starts_at: None,
        description: None,
        cancel_until: end,
        // Room for the waitlist tests' few users whatever the capacity.
        waitlist_size: capacity.max(100),
        check_in_from: None,
        check_in_until: None,
        expected_rate: None,
        buckets: 1,
        red_packet: None,
        sale_mode: Default::default(),
        draw: None,
        queue: None,
        created_at: OffsetDateTime::now_utc(),
    }
}

pub fn fresh_event_id() -> EventId {
    EventId::parse(&format!("t-{}", uuid::Uuid::now_v7().simple())).unwrap()
}

/// Eight characters of `event`'s id no other test's event shares (its random tail: the head of a
/// UUIDv7 is its time, the same for a minute), for user names of this test's own: the per-user
/// limits and the users' fields are shared by every test on the stack.
pub fn own_tail(event: &EventId) -> &str {
    &event.as_str()[event.as_str().len() - 8..]
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A sample event from `events/`.
pub fn fixture(name: &str) -> Value {
    let path = repo_root().join("events").join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .expect("fixture is JSON")
}

/// The fixture aimed at another event: path parameter and raw path.
pub fn for_event(mut event: Value, id: &EventId) -> Value {
    let old = event["pathParameters"]["id"].as_str().unwrap_or_default().to_owned();
    event["pathParameters"]["id"] = json!(id);
    if let Some(path) = event["rawPath"].as_str() {
        event["rawPath"] = json!(path.replace(&old, id.as_str()));
    }
    event
}

/// The fixture sent by another (non-admin) user.
pub fn for_user(mut event: Value, sub: &str) -> Value {
    event["requestContext"]["authorizer"]["jwt"]["claims"] =
        json!({ "sub": sub, "email": format!("{sub}@example.com"), "email_verified": "true" });
    event
}

pub fn without_claims(mut event: Value) -> Value {
    if let Some(ctx) = event["requestContext"].as_object_mut() {
        ctx.remove("authorizer");
    }
    event
}

pub fn with_body(mut event: Value, body: &Value) -> Value {
    event["body"] = json!(body.to_string());
    event
}

/// Query parameters as API Gateway sends them: parsed and raw (lambda_http reads the raw string).
pub fn with_query(mut event: Value, params: &[(&str, &str)]) -> Value {
    event["queryStringParameters"] =
        params.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect::<serde_json::Map<_, _>>().into();
    event["rawQueryString"] = json!(params.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&"));
    event
}

pub fn with_raw_body(mut event: Value, body: &str) -> Value {
    event["body"] = json!(body);
    event
}

/// Waits for a condition on real state, polling, up to `limit`.
pub async fn eventually<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// An SQS batch as the event source mapping hands it to mail: (message id, body) pairs.
/// An SQS event of `(message id, body, seal)` records, as the event source mapping delivers them.
pub fn sqs_batch_sealed(records: &[(&str, &str, Option<&str>)]) -> SqsEvent {
    let records: Vec<Value> = records
        .iter()
        .map(|(id, body, seal)| {
            let attributes = match seal {
                Some(seal) => json!({ "seal": { "stringValue": seal, "dataType": "String" } }),
                None => json!({}),
            };
            json!({ "messageId": id, "receiptHandle": format!("rh-{id}"), "body": body, "attributes": {}, "messageAttributes": attributes, "eventSource": "aws:sqs" })
        })
        .collect();
    serde_json::from_value(json!({ "Records": records })).unwrap()
}

impl TestApp {
    /// The event source mapping on this test's queue, feeding this test's mail function.
    pub fn poller(&self) -> local_runner::esm::Poller {
        local_runner::esm::Poller::new(self.sqs.clone(), &self.queue_url, self.functions.mail.clone())
    }

    /// The seal grab would put on this body.
    pub fn seal(&self, body: &str) -> String {
        self.settings.seal.seal(body)
    }

    /// One message handed to mail as grab would have sent it (sealed).
    pub async fn deliver(
        &self,
        body: &str,
    ) -> Result<shared::handlers::mail::Handled, shared::handlers::mail::MessageError> {
        self.functions.mail.handle_message(body, Some(&self.seal(body))).await
    }

    /// An SQS event of `(message id, body)` records, each sealed as grab seals it.
    pub fn sqs_batch(&self, records: &[(&str, &str)]) -> SqsEvent {
        let seals: Vec<String> = records.iter().map(|(_, body)| self.seal(body)).collect();
        let sealed: Vec<(&str, &str, Option<&str>)> =
            records.iter().zip(&seals).map(|((id, body), seal)| (*id, *body, Some(seal.as_str()))).collect();
        sqs_batch_sealed(&sealed)
    }

    /// Puts a message on this test's queue, sealed as grab seals it (a redelivery of the same body
    /// carries the same seal).
    pub async fn send_order(&self, body: &str) {
        shared::queue::OrderQueue::new(self.sqs.clone(), self.queue_url.clone())
            .send(body, &self.settings.seal)
            .await
            .expect("send to the test queue");
    }
}

/// `DEBUG_FAILOVER=1`: the functions' logs on stderr (run with `--nocapture`), to see what a slow or
/// failing failover run met.
pub fn logs_when_asked() {
    if std::env::var_os("DEBUG_FAILOVER").is_some() {
        let _ = tracing_subscriber::fmt().with_env_filter("info").with_writer(std::io::stderr).try_init();
    }
}
