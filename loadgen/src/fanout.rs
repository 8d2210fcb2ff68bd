//! The rush fanned out over load workers (the load kit: `loadkit/`, a Lambda function in the
//! operator's own account): the driver releases the event as a single run does, cuts the users into
//! slices, has every worker rush its slice from the same opening with [`run::rush`] (the very grab,
//! retries and latencies of a single run), merges what they answer into one rush and ends as a
//! single run ends ([`run::conclude`]: the drain awaited, every invariant checked), so the report
//! is the one a single run prints.
//!
//! A worker's request carries its users' tokens and its answer every user's requests: both must
//! fit Lambda's 6 MB payload of a synchronous invocation, which [`MAX_SLICE_JOBS`] bounds (see
//! there).

use std::{
    future::Future,
    ops::Range,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::{OffsetDateTime, format_description::well_known::Rfc3339};

use crate::{
    api::{Answer, Api},
    chart::Sample,
    report::{FanOutPhase, HashPhase, Latency, Report},
    run::{self, Crowd, Plan, RunError, Rushed, Users},
};

/// Lambda's limit on a synchronous invocation's request and on its response (6 MB each).
pub const PAYLOAD_LIMIT: usize = 6 * 1024 * 1024;

/// The most grab jobs (users x grabs per user) one worker runs. Its request holds a token per user:
/// a Cognito ID token is about 1 KB (1.2 KB with groups), so 1,500 users ask 1.8 MB. Its answer
/// holds each user's requests as three numbers each: about 150 bytes for a user answered at once,
/// and at worst (every verify-hash and grab retried to the client's limit of 60 each, each half a
/// minute) 2.4 KB, 3.6 MB for 1,500 (`a_slice_at_its_bound_fits_lambda_both_ways`). Both stay
/// under [`PAYLOAD_LIMIT`]; the driver also measures each request before sending it, and a worker
/// its answer.
pub const MAX_SLICE_JOBS: usize = 1_500;

/// How a worker's users ask: as loadgen's `--per-user` (each asks verify-hash at the opening and
/// grabs at once), or every hash had before the opening and the opening grabs alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    PerUser,
    HashesFirst,
}

/// A worker's event: one slice of the crowd and when to open.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SliceRequest {
    /// The API's base URL, as loadgen's `--base-url`.
    pub base_url: String,
    pub event_id: String,
    /// The first user's place in the whole crowd (the slice's users follow it).
    pub first_user: usize,
    /// The slice's users' tokens (ID tokens of the API's user pool).
    pub tokens: Vec<String>,
    /// When the slice's rush starts (epoch ms): the same for every worker, the sale's opening.
    pub start_at_ms: u64,
    /// Requests this worker keeps in flight.
    pub concurrency: usize,
    pub mode: Mode,
    #[serde(default = "one")]
    pub grabs_per_user: usize,
    /// This worker's share of the target rate, users started per second.
    #[serde(default)]
    pub rate: Option<f64>,
}

fn one() -> usize {
    1
}

/// A worker's answer: its slice's raw results, every request of every user, timed from the slice's
/// own start (`started_at_us`), each outcome named by its place in `outcomes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SliceResult {
    pub first_user: usize,
    /// When the slice's rush started (epoch µs): the origin of its samples.
    pub started_at_us: u64,
    /// From that start to the last reply (µs).
    pub elapsed_us: u64,
    /// With every hash had before the opening: each verify-hash request's latency (µs) and how long
    /// they took together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hashes: Option<SliceHashes>,
    /// The outcomes (`202`, `409 SOLD_OUT`, ...) the users' requests name by index.
    pub outcomes: Vec<String>,
    pub users: Vec<UserResult>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SliceHashes {
    pub elapsed_us: u64,
    pub latency_us: Vec<u64>,
}

/// One grab job of a slice's user: its last answer and every request on the way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserResult {
    /// The user's place in the slice.
    pub u: usize,
    /// When the user began (their first request), µs after the slice's start.
    pub began_us: u64,
    /// The last answer: its status, its body as far as the report reads it, its latency (µs).
    pub status: u16,
    pub body: Value,
    pub latency_us: u64,
    /// Every grab request: `[sent, µs after the slice's start; latency, µs; outcome]`.
    pub grabs: Vec<[u64; 3]>,
    /// The outcomes that were asked again.
    pub retried: Vec<u32>,
    /// Per user: each verify-hash request's latency (µs), asked before the grab.
    pub hashes_us: Vec<u64>,
}

/// The body fields the report and the checks read (the code for the outcome, the order and its
/// amount); the rest of a reply is not carried back.
const KEPT: [&str; 5] = ["code", "order_id", "ticket_no", "status", "amount"];

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Milliseconds since the epoch: the opening as a worker's request names it.
fn epoch_ms(t: OffsetDateTime) -> u64 {
    u64::try_from(t.unix_timestamp_nanos() / 1_000_000).unwrap_or(0)
}

fn epoch_us(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map(micros).unwrap_or(0)
}

struct Outcomes(Vec<String>);

impl Outcomes {
    fn index(&mut self, outcome: &str) -> u32 {
        let at = self.0.iter().position(|o| o == outcome).unwrap_or_else(|| {
            self.0.push(outcome.to_owned());
            self.0.len() - 1
        });
        u32::try_from(at).unwrap_or(u32::MAX)
    }
}

impl SliceResult {
    /// A slice's rush as a worker sends it back.
    pub fn of(
        first_user: usize,
        started_at: SystemTime,
        elapsed: Duration,
        hashes: Option<(&[Duration], Duration)>,
        rushed: &[Rushed],
    ) -> Self {
        let mut outcomes = Outcomes(Vec::new());
        let users = rushed
            .iter()
            .map(|Rushed { answered: (u, last, sent, retried), began_s, hash_latencies }| {
                let body = match &last.body {
                    Value::Object(fields) => Value::Object(
                        fields
                            .iter()
                            .filter(|(k, _)| KEPT.contains(&k.as_str()))
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect(),
                    ),
                    _ => Value::Null,
                };
                UserResult {
                    u: *u,
                    began_us: (began_s * 1e6).round() as u64,
                    status: last.status,
                    body,
                    latency_us: micros(last.latency),
                    grabs: sent
                        .iter()
                        .map(|s| {
                            [(s.at_s * 1e6).round() as u64, micros(s.latency), u64::from(outcomes.index(&s.outcome))]
                        })
                        .collect(),
                    retried: retried.iter().map(|o| outcomes.index(o)).collect(),
                    hashes_us: hash_latencies.iter().copied().map(micros).collect(),
                }
            })
            .collect();
        Self {
            first_user,
            started_at_us: epoch_us(started_at),
            elapsed_us: micros(elapsed),
            hashes: hashes.map(|(latencies, took)| SliceHashes {
                elapsed_us: micros(took),
                latency_us: latencies.iter().copied().map(micros).collect(),
            }),
            outcomes: outcomes.0,
            users,
        }
    }
}

/// A worker's run: the hashes first if asked, the wait for the opening, [`run::rush`] on its slice.
/// Runs in the load kit's function (`loadkit/src/main.rs`).
pub async fn run_slice(req: SliceRequest) -> Result<SliceResult, String> {
    let jobs = req.tokens.len() * req.grabs_per_user.max(1);
    if jobs > MAX_SLICE_JOBS {
        return Err(format!("a slice of {jobs} grabs; at most {MAX_SLICE_JOBS} fit a worker's answer"));
    }
    let api = Api::new(&req.base_url, req.concurrency.max(1)).map_err(|e| format!("an HTTP client: {e}"))?;
    let hidden = ProgressBar::hidden();
    let had = match req.mode {
        Mode::PerUser => None,
        Mode::HashesFirst => {
            let started = Instant::now();
            let had = run::hashes_before_opening(&api, &req.tokens, &req.event_id, req.concurrency, &hidden)
                .await
                .map_err(|missing| format!("user {} got no verify hash", req.first_user + missing))?;
            Some((had, started.elapsed()))
        }
    };
    let start = UNIX_EPOCH + Duration::from_millis(req.start_at_ms);
    if let Ok(wait) = start.duration_since(SystemTime::now()) {
        tokio::time::sleep(wait).await;
    }
    let crowd = Crowd {
        tokens: &req.tokens,
        event: &req.event_id,
        hashes: had.as_ref().map_or(&[][..], |(h, _)| &h.hashes),
        grabs_per_user: req.grabs_per_user.max(1),
        concurrency: req.concurrency,
        rate: req.rate,
    };
    let started_at = SystemTime::now();
    let started = Instant::now();
    let rushed = run::rush(&api, &crowd, started, &hidden).await;
    let result = SliceResult::of(
        req.first_user,
        started_at,
        started.elapsed(),
        had.as_ref().map(|(h, took)| (&h.latencies[..], *took)),
        &rushed,
    );
    let size = serde_json::to_vec(&result).map(|b| b.len()).unwrap_or(0);
    if size > PAYLOAD_LIMIT {
        return Err(format!("the slice's answer is {size} bytes, over Lambda's {PAYLOAD_LIMIT}: use more workers"));
    }
    Ok(result)
}

/// The slices' answers as one rush: each user at their place in the crowd, every sample timed from
/// the first worker's start.
pub struct Merged {
    pub rushed: Vec<Rushed>,
    /// The first worker's start: the run's first grab.
    pub origin: SystemTime,
    /// From the origin to the last worker's last reply.
    pub seconds: f64,
    /// With every hash had before the opening: the phase over all workers.
    pub hashes: Option<HashPhase>,
    /// Each worker's start after the opening asked for (ms; negative: early).
    pub starts_ms: Vec<f64>,
}

pub fn merge(results: &[SliceResult], opening_ms: u64) -> Result<Merged, RunError> {
    let origin_us = results.iter().map(|r| r.started_at_us).min().unwrap_or(0);
    let mut rushed = Vec::new();
    let mut end_us = 0;
    let (mut hash_latencies, mut hash_seconds, mut hashes_first) = (Vec::new(), 0.0_f64, false);
    for r in results {
        let shift = r.started_at_us - origin_us;
        end_us = end_us.max(shift + r.elapsed_us);
        if let Some(h) = &r.hashes {
            hashes_first = true;
            hash_latencies.extend(h.latency_us.iter().copied().map(Duration::from_micros));
            hash_seconds = hash_seconds.max(h.elapsed_us as f64 / 1e6);
        }
        let outcome = |i: u64| {
            r.outcomes.get(i as usize).cloned().ok_or_else(|| {
                RunError::Setup(format!("the slice from user {} names outcome {i}, which it lacks", r.first_user))
            })
        };
        for user in &r.users {
            let sent = user
                .grabs
                .iter()
                .map(|[at, latency, o]| {
                    Ok(Sample {
                        at_s: (shift + at) as f64 / 1e6,
                        latency: Duration::from_micros(*latency),
                        outcome: outcome(*o)?,
                    })
                })
                .collect::<Result<Vec<_>, RunError>>()?;
            let retried = user.retried.iter().map(|o| outcome(u64::from(*o))).collect::<Result<Vec<_>, _>>()?;
            let last = Answer {
                status: user.status,
                body: user.body.clone(),
                retry_after: None,
                latency: Duration::from_micros(user.latency_us),
            };
            let hashes = user.hashes_us.iter().copied().map(Duration::from_micros).collect();
            rushed.push(Rushed {
                answered: (r.first_user + user.u, last, sent, retried),
                began_s: (shift + user.began_us) as f64 / 1e6,
                hash_latencies: hashes,
            });
        }
    }
    Ok(Merged {
        rushed,
        origin: UNIX_EPOCH + Duration::from_micros(origin_us),
        seconds: end_us as f64 / 1e6,
        hashes: hashes_first.then(|| HashPhase {
            requests: hash_latencies.len(),
            seconds: hash_seconds,
            latency: Latency::of(&hash_latencies),
        }),
        starts_ms: results.iter().map(|r| r.started_at_us as f64 / 1e3 - opening_ms as f64).collect(),
    })
}

/// `n` users in `workers` slices, in order, their sizes at most one apart (no empty slice).
pub fn slices(n: usize, workers: usize) -> Vec<Range<usize>> {
    let workers = workers.clamp(1, n.max(1));
    let (each, more) = (n / workers, n % workers);
    let mut start = 0;
    (0..workers)
        .map(|i| {
            let len = each + usize::from(i < more);
            let slice = start..start + len;
            start += len;
            slice
        })
        .collect()
}

/// Where slices run: the load kit's function (`LambdaWorkers`), or anything that answers a
/// worker's request with its result.
pub trait Workers {
    /// One worker's run: its request (JSON) in, its answer (JSON) out, or why it failed.
    fn invoke(&self, request: Vec<u8>) -> impl Future<Output = Result<Vec<u8>, String>>;
    /// What the report names the workers by.
    fn name(&self) -> String;
}

/// How the crowd is fanned out.
pub struct FanOut {
    /// Workers invoked at once, each a slice of the users.
    pub workers: usize,
    /// The API's base URL as the workers reach it.
    pub base_url: String,
}

/// A sale run as [`run::run`] runs it, its rush fanned out over the workers.
pub async fn run_fanned(
    api: &Api,
    users: &Users,
    plan: &Plan,
    fan: &FanOut,
    workers: &impl Workers,
) -> Result<Report, RunError> {
    if plan.hold_mail {
        return Err(RunError::Setup("--hold-mail is the local runner's; a fan-out drives a deployed API".into()));
    }
    let cut = slices(users.tokens.len(), fan.workers);
    let largest = cut.iter().map(ExactSizeIterator::len).max().unwrap_or(0);
    if largest * plan.grabs_per_user > MAX_SLICE_JOBS {
        return Err(RunError::Setup(format!(
            "{} users over {} workers is {largest} a worker; at most {MAX_SLICE_JOBS} grabs fit one: raise --fan-out",
            users.tokens.len(),
            cut.len()
        )));
    }
    let (event, opens, mut report) = run::release(api, users, plan).await?;
    let opening_ms = epoch_ms(opens);
    let mode = if plan.per_user { Mode::PerUser } else { Mode::HashesFirst };
    let requests = cut
        .iter()
        .map(|slice| {
            let request = SliceRequest {
                base_url: fan.base_url.clone(),
                event_id: event.clone(),
                first_user: slice.start,
                tokens: users.tokens[slice.clone()].to_vec(),
                start_at_ms: opening_ms,
                concurrency: plan.concurrency,
                mode,
                grabs_per_user: plan.grabs_per_user,
                rate: plan.rate.map(|r| r / cut.len() as f64),
            };
            let bytes = serde_json::to_vec(&request).map_err(|e| RunError::Setup(e.to_string()))?;
            if bytes.len() > PAYLOAD_LIMIT {
                return Err(RunError::Setup(format!(
                    "the slice from user {} is a {} byte request, over Lambda's {PAYLOAD_LIMIT}: raise --fan-out",
                    slice.start,
                    bytes.len()
                )));
            }
            Ok(bytes)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let invoked = Instant::now();
    let spinner = ProgressBar::new_spinner();
    spinner.enable_steady_tick(Duration::from_millis(200));
    spinner.set_message(format!("{} workers rushing {} users", cut.len(), users.tokens.len()));
    let answers = futures::future::join_all(requests.into_iter().map(|r| workers.invoke(r))).await;
    spinner.finish_and_clear();
    let invoked_s = invoked.elapsed().as_secs_f64();
    let mut results = Vec::with_capacity(answers.len());
    for (slice, answer) in cut.iter().zip(answers) {
        let answer = answer.map_err(|e| RunError::Setup(format!("the worker of users {slice:?} failed: {e}")))?;
        let result: SliceResult = serde_json::from_slice(&answer).map_err(|e| {
            RunError::Setup(format!(
                "the worker of users {slice:?} answered what is not a slice's result ({e}): {}",
                String::from_utf8_lossy(&answer[..answer.len().min(300)])
            ))
        })?;
        if result.first_user != slice.start || result.users.len() != slice.len() * plan.grabs_per_user {
            return Err(RunError::Setup(format!(
                "the worker of users {slice:?} answered for {} grabs from user {}",
                result.users.len(),
                result.first_user
            )));
        }
        results.push(result);
    }
    let merged = merge(&results, opening_ms)?;
    if let Some(hashes) = merged.hashes {
        report.hashes = hashes;
    }
    let starts = merged.starts_ms.iter().copied();
    report.fan_out = Some(FanOutPhase {
        function: workers.name(),
        workers: cut.len(),
        smallest_slice: cut.iter().map(ExactSizeIterator::len).min().unwrap_or(0),
        largest_slice: largest,
        opening: opens.format(&Rfc3339).unwrap_or_default(),
        latest_start_ms: starts.clone().fold(f64::NEG_INFINITY, f64::max).max(0.0),
        earliest_start_ms: starts.fold(f64::INFINITY, f64::min).max(0.0),
        invoked_s,
    });
    let tally = run::tally(plan, merged.rushed, merged.seconds);
    run::conclude(api, users, plan, &event, report, tally, merged.origin, None).await
}

/// The load kit's function, invoked synchronously (`RequestResponse`) through the Lambda API:
/// credentials, region and endpoint from the environment as the AWS CLI finds them
/// (`AWS_ENDPOINT_URL` reaches an emulator). Never retried: a second invocation would rush the
/// slice's users again.
pub struct LambdaWorkers {
    client: aws_sdk_lambda::Client,
    function: String,
}

impl LambdaWorkers {
    pub async fn new(function: &str) -> Self {
        use aws_config::{BehaviorVersion, retry::RetryConfig, timeout::TimeoutConfig};
        let config = aws_config::defaults(BehaviorVersion::latest())
            .retry_config(RetryConfig::disabled())
            // A worker may run up to its 15-minute timeout; the call waits for it.
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(10))
                    .operation_timeout(Duration::from_secs(960))
                    .build(),
            )
            .load()
            .await;
        Self { client: aws_sdk_lambda::Client::new(&config), function: function.to_owned() }
    }
}

impl Workers for LambdaWorkers {
    async fn invoke(&self, request: Vec<u8>) -> Result<Vec<u8>, String> {
        let out = self
            .client
            .invoke()
            .function_name(&self.function)
            .invocation_type(aws_sdk_lambda::types::InvocationType::RequestResponse)
            .payload(aws_sdk_lambda::primitives::Blob::new(request))
            .send()
            .await
            .map_err(|e| {
                use aws_sdk_lambda::error::ProvideErrorMetadata;
                match (e.code(), e.message()) {
                    (Some(code), message) => format!("{code}: {}", message.unwrap_or_default()),
                    _ => aws_sdk_lambda::error::DisplayErrorContext(e).to_string(),
                }
            })?;
        let body = out.payload.map(aws_sdk_lambda::primitives::Blob::into_inner).unwrap_or_default();
        match out.function_error {
            Some(kind) => Err(format!("{kind}: {}", String::from_utf8_lossy(&body))),
            None => Ok(body),
        }
    }

    fn name(&self) -> String {
        self.function.clone()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use serde_json::json;

    use super::*;
    use crate::run::{Plan, reply_checks, tally};

    fn plan(per_user: bool) -> Plan {
        Plan {
            scenario: "custom".into(),
            tickets: 4,
            concurrency: 8,
            grabs_per_user: 1,
            lead: Duration::from_secs(2),
            confirm_timeout: Duration::from_secs(60),
            mailbox: None,
            hold_mail: false,
            red_packets: Some((4_000, "CNY".into())),
            admission_rate: None,
            proof_of_work_bits: None,
            draw_out: None,
            buckets: None,
            per_user,
            rush_only: false,
            rate: Some(250.0),
        }
    }

    fn sample(at_us: u64, latency_us: u64, outcome: &str) -> Sample {
        Sample { at_s: at_us as f64 / 1e6, latency: Duration::from_micros(latency_us), outcome: outcome.into() }
    }

    fn answer(status: u16, body: Value, latency_us: u64) -> Answer {
        Answer { status, body, retry_after: None, latency: Duration::from_micros(latency_us) }
    }

    /// Eleven users as one process would have seen them: four winners (one after a 503, one told
    /// by a retry's 200 after a transport failure), six refused, one unauthorised, their replies
    /// carrying more than the report reads; each asked verify-hash first.
    fn crowd() -> Vec<Rushed> {
        (0..11usize)
            .map(|u| {
                let at = 1_000 + 4_000 * u as u64;
                let order = json!({ "order_id": format!("0199-{u}"), "ticket_no": u + 1, "status": "PENDING",
                                    "amount": { "value": 1_000, "currency": "CNY" }, "extra": "not carried" });
                let (last, sent, retried) = match u {
                    0 | 2 => (answer(202, order, 900 + u as u64), vec![sample(at, 900 + u as u64, "202")], vec![]),
                    1 => (
                        answer(202, order, 1_100),
                        vec![sample(at, 2_500, "503 BUSY"), sample(at + 102_500, 1_100, "202")],
                        vec!["503 BUSY".to_owned()],
                    ),
                    3 => (
                        answer(200, order, 700),
                        vec![sample(at, 30_000, "0 TRANSPORT"), sample(at + 130_000, 700, "200")],
                        vec!["0 TRANSPORT".to_owned()],
                    ),
                    10 => {
                        (answer(401, json!({ "message": "Unauthorized" }), 300), vec![sample(at, 300, "401")], vec![])
                    }
                    _ => {
                        let refused = json!({ "code": "SOLD_OUT", "type": "about:blank", "status": 409 });
                        (answer(409, refused, 400 + u as u64), vec![sample(at, 400 + u as u64, "409 SOLD_OUT")], vec![])
                    }
                };
                Rushed {
                    answered: (u, last, sent, retried),
                    began_s: (at - 500) as f64 / 1e6,
                    hash_latencies: vec![Duration::from_micros(1_500 + u as u64)],
                }
            })
            .collect()
    }

    fn users(n: usize) -> Users {
        Users { admin: "admin".into(), tokens: vec!["t".into(); n], emails: vec![None; n], subs: vec![None; n] }
    }

    /// The last reply of a set of rushed users, after their origin (µs).
    fn last_reply_us(rushed: &[Rushed]) -> u64 {
        rushed
            .iter()
            .flat_map(|r| r.answered.2.iter().map(|s| micros(Duration::from_secs_f64(s.at_s) + s.latency)))
            .max()
            .unwrap_or(0)
    }

    /// The crowd cut as a fan-out cuts it, each slice rushed by a worker that started `k` ms after
    /// the first (its samples timed from its own start), answered through JSON as Lambda carries
    /// it, and merged.
    fn fanned(crowd: &[Rushed], workers: usize, origin_us: u64) -> Merged {
        let results: Vec<SliceResult> = slices(crowd.len(), workers)
            .into_iter()
            .enumerate()
            .map(|(k, slice)| {
                let shift = 1_000 * k as u64;
                let local: Vec<Rushed> = crowd[slice.clone()]
                    .iter()
                    .map(|Rushed { answered: (u, last, sent, retried), began_s, hash_latencies }| {
                        let local = |s: f64| (micros(Duration::from_secs_f64(s)) - shift) as f64 / 1e6;
                        let sent = sent.iter().map(|s| Sample { at_s: local(s.at_s), ..s.clone() }).collect();
                        Rushed {
                            answered: (u - slice.start, last.clone(), sent, retried.clone()),
                            began_s: local(*began_s),
                            hash_latencies: hash_latencies.clone(),
                        }
                    })
                    .collect();
                let started = UNIX_EPOCH + Duration::from_micros(origin_us + shift);
                let result =
                    SliceResult::of(slice.start, started, Duration::from_micros(last_reply_us(&local)), None, &local);
                serde_json::from_slice(&serde_json::to_vec(&result).unwrap()).unwrap()
            })
            .collect();
        merge(&results, origin_us / 1_000).unwrap()
    }

    #[test]
    fn slices_cover_the_crowd_in_order_their_sizes_at_most_one_apart() {
        assert_eq!(slices(10, 3), vec![0..4, 4..7, 7..10]);
        assert_eq!(slices(40, 2), vec![0..20, 20..40]);
        assert_eq!(slices(2, 5), vec![0..1, 1..2], "no empty slice");
        assert_eq!(slices(7, 0), vec![0..7]);
        for (n, w) in [(1, 1), (1_001, 7), (30_000, 21)] {
            let cut = slices(n, w);
            assert_eq!(cut.first().unwrap().start, 0);
            assert_eq!(cut.last().unwrap().end, n);
            assert!(cut.windows(2).all(|p| p[0].end == p[1].start));
            let sizes: Vec<usize> = cut.iter().map(ExactSizeIterator::len).collect();
            assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1, "{sizes:?}");
        }
    }

    #[test]
    fn the_merged_slices_tally_as_one_process_would_have() {
        let crowd = crowd();
        let plan = plan(true);
        let one = tally(&plan, crowd.clone(), last_reply_us(&crowd) as f64 / 1e6);
        let origin_us = 1_764_000_000_000_000;
        for workers in [1, 2, 3, 11] {
            let merged = fanned(&crowd, workers, origin_us);
            assert_eq!(merged.origin, UNIX_EPOCH + Duration::from_micros(origin_us));
            assert_eq!(merged.starts_ms, (0..workers).map(|k| k as f64).collect::<Vec<_>>());
            let many = tally(&plan, merged.rushed, merged.seconds);
            let json = |v: &dyn erased::Json| v.value();
            assert_eq!(json(&many.grabs), json(&one.grabs), "{workers} workers: the grab phase");
            assert_eq!(json(&many.hashes), json(&one.hashes), "{workers} workers: verify-hash per user");
            assert_eq!(json(&many.pacing), json(&one.pacing), "{workers} workers: the pacing");
            assert_eq!(many.told, one.told, "{workers} workers: what each user was told");
            let by_time = |mut s: Vec<Sample>| {
                s.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
                s
            };
            assert_eq!(by_time(many.samples.clone()), by_time(one.samples.clone()), "{workers} workers: every request");
            let checks = |t: &run::Tally| json(&reply_checks(&users(11), &plan, &t.answers, &t.told));
            assert_eq!(checks(&many), checks(&one), "{workers} workers: the checks of the replies");
        }
        // The crowd came at 250 users/s: eleven users over 40 ms.
        let pacing = one.pacing.as_ref().unwrap();
        assert!(
            (pacing.spread_s - 0.04).abs() < 1e-9 && (pacing.achieved_users_per_s - 250.0).abs() < 1e-6,
            "{pacing:?}"
        );
        // And what the checks see: a winner told by a retry, one unauthorised grab failing the run.
        let outcomes: HashMap<&str, usize> = one.grabs.outcomes.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(outcomes, HashMap::from([("202", 3), ("200", 1), ("409 SOLD_OUT", 6), ("401", 1)]));
        let checks = reply_checks(&users(11), &plan, &one.answers, &one.told);
        let failed: Vec<&str> = checks.iter().filter(|c| !c.pass).map(|c| c.name).collect();
        assert_eq!(failed, vec!["every grab answered"]);
    }

    #[test]
    fn hashes_had_before_the_opening_merge_over_the_workers() {
        let at = |us| Duration::from_micros(us);
        let result = |first_user, latencies: Vec<u64>, took| SliceResult {
            first_user,
            started_at_us: 5_000_000,
            elapsed_us: 10,
            hashes: Some(SliceHashes { elapsed_us: took, latency_us: latencies }),
            outcomes: vec![],
            users: vec![],
        };
        let merged = merge(&[result(0, vec![1_000, 3_000], 40_000), result(2, vec![2_000], 90_000)], 5_000).unwrap();
        let hashes = merged.hashes.unwrap();
        assert_eq!((hashes.requests, hashes.seconds), (3, 0.09));
        assert_eq!(
            serde_json::to_value(hashes.latency).unwrap(),
            serde_json::to_value(Latency::of(&[at(1_000), at(2_000), at(3_000)])).unwrap()
        );
    }

    #[test]
    fn a_slice_at_its_bound_fits_lambda_both_ways() {
        // The request: 1,500 users' tokens, each as long as a Cognito ID token with groups.
        let request = SliceRequest {
            base_url: "https://abcdefghij.execute-api.eu-west-1.amazonaws.com".into(),
            event_id: format!("lg-custom-{}", "0".repeat(32)),
            first_user: 28_500,
            tokens: vec!["x".repeat(1_200); MAX_SLICE_JOBS],
            start_at_ms: 1_764_000_000_000,
            concurrency: 64,
            mode: Mode::PerUser,
            grabs_per_user: 1,
            rate: Some(1_000.0),
        };
        let size = serde_json::to_vec(&request).unwrap().len();
        assert!(size < PAYLOAD_LIMIT, "request {size}");
        // The answer at its worst: every user asked verify-hash and grab 60 times each (the
        // client's limit), fifteen minutes in, each request half a minute.
        let worst = UserResult {
            u: 1_499,
            began_us: 899_000_000,
            status: 202,
            body: json!({ "order_id": "0199b7e4-1f2a-7c3d-9e8f-0a1b2c3d4e5f", "ticket_no": 19_999, "status": "PENDING",
                          "amount": { "value": 88_888, "currency": "CNY" } }),
            latency_us: 30_000_000,
            grabs: vec![[900_000_000, 30_000_000, 12]; 60],
            retried: vec![12; 59],
            hashes_us: vec![30_000_000; 60],
        };
        let result = SliceResult {
            first_user: 28_500,
            started_at_us: 1_764_000_000_000_000,
            elapsed_us: 900_000_000,
            hashes: None,
            outcomes: (0..20).map(|i| format!("409 SOME_LONG_CODE_{i}")).collect(),
            users: vec![worst; MAX_SLICE_JOBS],
        };
        let size = serde_json::to_vec(&result).unwrap().len();
        assert!(size < PAYLOAD_LIMIT, "answer {size}");
    }

    /// Values compared through their JSON (the report's types serialise, they do not compare).
    mod erased {
        pub trait Json {
            fn value(&self) -> serde_json::Value;
        }
        impl<T: serde::Serialize> Json for T {
            fn value(&self) -> serde_json::Value {
                serde_json::to_value(self).unwrap()
            }
        }
    }
}
