//! Plays the SQS event source mapping: polls the orders queue in batches of up to `MAX_BATCH`, hands each
//! batch to the mail handler as an SQS event, deletes the messages that succeeded and leaves the
//! failed ones, so SQS delivers them again after the visibility timeout and, after the redrive's
//! receives, moves them to the DLQ. Like a mapping's `Enabled`, it can be switched off and on at
//! run time ([`Switch`]): messages wait on the queue meanwhile.
//!
//! In AWS the mail fleet and the grabs share nothing: SQS, DynamoDB and SES scale on their own.
//! Here one emulator process serves them all on one core, and every message mailed costs it about
//! six times a grab's send (docs/BENCHMARKS.md "The rush beside the release before"), so a
//! draining consumer at full width takes the rush's emulator from the grabs. The runner's poller
//! therefore yields to its front ([`Rush`]): while the front has many requests in flight, one
//! poller of the `pollers` receives; the rest resume when it has been quiet for a moment.

use std::{
    sync::atomic::Ordering,
    time::{Duration, Instant},
};

use aws_lambda_events::sqs::SqsEvent;
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, MessageSystemAttributeName};
use serde_json::{Value, json};
use shared::handlers::mail::Mail;

/// Whether the mapping delivers: Lambda's `Enabled`, as `aws lambda update-event-source-mapping
/// --no-enabled` / `--enabled` switches it. Switching it off returns once no batch is in hand (the
/// ones in hand are finished), so from then on every message sent stays on the queue.
#[derive(Clone)]
pub struct Switch(std::sync::Arc<SwitchState>);

struct SwitchState {
    enabled: tokio::sync::watch::Sender<bool>,
    /// Each poll (receive, handle, delete) holds it shared; switching off takes it alone once.
    polls: tokio::sync::RwLock<()>,
}

impl Switch {
    pub fn new(enabled: bool) -> Self {
        Self(std::sync::Arc::new(SwitchState {
            enabled: tokio::sync::watch::Sender::new(enabled),
            polls: tokio::sync::RwLock::new(()),
        }))
    }

    pub async fn set(&self, enabled: bool) {
        self.0.enabled.send_replace(enabled);
        if !enabled {
            // The lock is fair: polls starting after this wait for it, then see the switch off.
            drop(self.0.polls.write().await);
        }
    }

    pub fn enabled(&self) -> bool {
        *self.0.enabled.borrow()
    }
}

impl Default for Switch {
    fn default() -> Self {
        Self::new(true)
    }
}

/// Whether the front is in a rush: [`Rush::BUSY_AT`] requests or more in flight at once, now or
/// within the last [`Rush::QUIET_AFTER`]. A client asking one request after another (loadgen's
/// probes of the drain, the organiser's page) is not a rush. Cloned handles share it.
#[derive(Clone, Default)]
pub struct Rush(std::sync::Arc<RushState>);

#[derive(Default)]
struct RushState {
    in_flight: std::sync::atomic::AtomicUsize,
    /// Milliseconds after `origin` of the latest moment the front was busy, plus one (0: never).
    last_busy_ms: std::sync::atomic::AtomicU64,
    origin: std::sync::OnceLock<Instant>,
}

/// A request in flight at the front, from [`Rush::enter`] until dropped.
pub struct InFlight(Rush);

impl Drop for InFlight {
    fn drop(&mut self) {
        (self.0).0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Rush {
    /// Requests in flight at once that make a rush.
    pub const BUSY_AT: usize = 4;
    /// How long after its last busy moment the front counts as quiet.
    pub const QUIET_AFTER: Duration = Duration::from_millis(250);

    /// The front took a request; it is in flight until the guard is dropped.
    pub fn enter(&self) -> InFlight {
        self.enter_at(Instant::now())
    }

    /// Whether the front is busy, or was within [`Self::QUIET_AFTER`].
    pub fn on(&self) -> bool {
        self.on_at(Instant::now())
    }

    fn enter_at(&self, now: Instant) -> InFlight {
        if self.0.in_flight.fetch_add(1, Ordering::Relaxed) + 1 >= Self::BUSY_AT {
            self.0.last_busy_ms.store(self.ms(now) + 1, Ordering::Relaxed);
        }
        InFlight(self.clone())
    }

    fn on_at(&self, now: Instant) -> bool {
        let last = self.0.last_busy_ms.load(Ordering::Relaxed);
        self.0.in_flight.load(Ordering::Relaxed) >= Self::BUSY_AT
            || last != 0 && (self.ms(now) + 1).saturating_sub(last) < Self::QUIET_AFTER.as_millis() as u64
    }

    fn ms(&self, now: Instant) -> u64 {
        now.saturating_duration_since(*self.0.origin.get_or_init(|| now)).as_millis() as u64
    }
}

pub struct Poller {
    pub sqs: aws_sdk_sqs::Client,
    pub queue_url: String,
    pub mail: Mail,
    pub batch_size: i32,
    /// The front this poller yields to (the runner's); none in the tests' own pollers.
    pub yields_to: Option<Rush>,
}

impl Poller {
    /// A poller taking whole batches (`queue::MAX_BATCH`), the event source mapping's default.
    pub fn new(sqs: aws_sdk_sqs::Client, queue_url: impl Into<String>, mail: Mail) -> Self {
        Self { sqs, queue_url: queue_url.into(), mail, batch_size: shared::queue::MAX_BATCH as i32, yields_to: None }
    }

    /// While `rush` is on, one poller receives and the others wait.
    pub fn yielding_to(self, rush: Rush) -> Self {
        Self { yields_to: Some(rush), ..self }
    }

    /// Polls while `switch` is on, until `stop` turns true; `pollers` batches are in flight at
    /// once, as Lambda scales (one while the front it yields to is in a rush).
    pub async fn run(self, pollers: usize, switch: Switch, stop: tokio::sync::watch::Receiver<bool>) {
        let this = std::sync::Arc::new(self);
        let tasks: Vec<_> = (0..pollers)
            .map(|n| {
                let this = this.clone();
                let mut stop = stop.clone();
                let switch = switch.clone();
                let mut enabled = switch.0.enabled.subscribe();
                tokio::spawn(async move {
                    // A batch in hand is always finished: dropping it mid-way would be a crash
                    // between the mail claim and the send.
                    while !*stop.borrow() {
                        let poll = switch.0.polls.read().await;
                        if !*enabled.borrow_and_update() {
                            drop(poll);
                            tokio::select! {
                                _ = enabled.changed() => {}
                                _ = stop.changed() => {}
                            }
                            continue;
                        }
                        if n > 0
                            && let Some(rush) = this.yields_to.as_ref().filter(|r| r.on())
                        {
                            drop(poll);
                            while rush.on() && !*stop.borrow() {
                                tokio::select! {
                                    _ = tokio::time::sleep(Rush::QUIET_AFTER / 2) => {}
                                    _ = stop.changed() => {}
                                }
                            }
                            continue;
                        }
                        let polled = this.poll_once().await;
                        drop(poll);
                        if let Err(e) = polled {
                            tracing::warn!(error = %e, "polling the orders queue failed");
                            tokio::time::sleep(Duration::from_millis(500)).await;
                        }
                    }
                })
            })
            .collect();
        for task in tasks {
            let _ = task.await;
        }
    }

    /// Receives one batch and handles it. Returns how many messages it received.
    pub async fn poll_once(&self) -> Result<usize, String> {
        let out = self
            .sqs
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(self.batch_size)
            .wait_time_seconds(1)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await
            .map_err(|e| aws_sdk_sqs::error::DisplayErrorContext(e).to_string())?;
        let messages = out.messages.unwrap_or_default();
        if messages.is_empty() {
            return Ok(0);
        }
        let records: Vec<Value> = messages
            .iter()
            .map(|m| {
                let attributes: serde_json::Map<String, Value> = m
                    .attributes()
                    .map(|a| a.iter().map(|(k, v)| (k.as_str().to_owned(), json!(v))).collect())
                    .unwrap_or_default();
                // As the event source mapping delivers them: camelCase inside each attribute.
                let message_attributes: serde_json::Map<String, Value> = m
                    .message_attributes()
                    .map(|a| {
                        a.iter()
                            .map(|(k, v)| {
                                (k.clone(), json!({ "stringValue": v.string_value(), "dataType": v.data_type() }))
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                json!({
                    "messageId": m.message_id(),
                    "receiptHandle": m.receipt_handle(),
                    "body": m.body(),
                    "md5OfBody": m.md5_of_body(),
                    "attributes": attributes,
                    "messageAttributes": message_attributes,
                    "eventSource": "aws:sqs",
                    "eventSourceARN": format!("arn:aws:sqs:local:000000000000:{}", self.queue_url.rsplit('/').next().unwrap_or_default()),
                    "awsRegion": "us-east-1",
                })
            })
            .collect();
        let event: SqsEvent = serde_json::from_value(json!({ "Records": records })).map_err(|e| e.to_string())?;
        let response = self.mail.handle_batch(event).await;
        let failed: std::collections::HashSet<&str> =
            response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
        let done: Vec<DeleteMessageBatchRequestEntry> = messages
            .iter()
            .enumerate()
            .filter(|(_, m)| !failed.contains(m.message_id().unwrap_or_default()))
            .filter_map(|(i, m)| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(m.receipt_handle().unwrap_or_default())
                    .build()
                    .ok()
            })
            .collect();
        if !done.is_empty() {
            self.sqs
                .delete_message_batch()
                .queue_url(&self.queue_url)
                .set_entries(Some(done))
                .send()
                .await
                .map_err(|e| aws_sdk_sqs::error::DisplayErrorContext(e).to_string())?;
        }
        Ok(messages.len())
    }
}

#[cfg(test)]
mod tests {
    use super::Rush;

    #[test]
    fn a_rush_is_many_requests_at_once_and_ends_a_quiet_moment_after_the_last_busy_one() {
        let (rush, start) = (Rush::default(), std::time::Instant::now());
        let at = |ms: u64| start + std::time::Duration::from_millis(ms);
        let half = Rush::QUIET_AFTER.as_millis() as u64 / 2;
        assert!(!rush.on_at(start), "no request yet");
        // One request after another, however many: not a rush.
        for i in 0..100 {
            drop(rush.enter_at(at(i)));
            assert!(!rush.on_at(at(i)), "request {i} alone in flight");
        }
        let mut crowd: Vec<_> = (0..Rush::BUSY_AT - 1).map(|_| rush.enter_at(at(100))).collect();
        assert!(!rush.on_at(at(100)), "{} in flight", Rush::BUSY_AT - 1);
        crowd.push(rush.clone().enter_at(at(100)));
        assert!(rush.on_at(at(100)), "{} in flight (a clone shares the count)", Rush::BUSY_AT);
        drop(crowd);
        assert!(rush.on_at(at(100 + half)), "half the quiet time after the last busy moment");
        assert!(!rush.on_at(at(100 + 2 * half)), "quiet once the quiet time has passed");
        drop(rush.enter_at(at(100 + 3 * half)));
        assert!(!rush.on_at(at(100 + 3 * half)), "one request again: still quiet");
    }
}
