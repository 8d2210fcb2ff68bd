//! SQS: the orders queue. The body is the order message exactly as the grab script wrote it into
//! the outbox; the `seal` attribute vouches for it (`domain::order_seal`).

/// The most orders one receive (and so one mail invocation) takes: SQS's limit for a standard
/// queue's `ReceiveMessage`, the event source mapping's batch (template.yaml's `MailBatchSize` at
/// most this), and the mails one invocation sends at once (`MailSettings::DEFAULT_CONCURRENCY`).
pub const MAX_BATCH: usize = 10;

use aws_sdk_sqs::{Client, types::MessageAttributeValue};

use crate::secrets::StagedSecret;
use domain::order_seal::{SEAL_ATTRIBUTE, SealKey};

#[derive(Debug, thiserror::Error)]
#[error("sqs: {0}")]
pub struct QueueError(String);

/// No order goes unsealed: a key that cannot be had fails the send.
impl From<crate::secrets::SecretError> for QueueError {
    fn from(e: crate::secrets::SecretError) -> Self {
        Self(format!("the order key: {e}"))
    }
}

/// The fault campaign's switch (bench/src/campaign.rs, "counts-lie"): while set, every queue in
/// this process reads empty, as SQS's approximate counts may while messages are in flight. Never
/// set outside it.
#[doc(hidden)]
pub static COUNTS_LIE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[derive(Clone)]
pub struct OrderQueue {
    client: Client,
    url: String,
}

impl OrderQueue {
    pub fn new(client: Client, url: impl Into<String>) -> Self {
        Self { client, url: url.into() }
    }

    /// The queue's name (its URL's last part, as its ARN's).
    pub fn name(&self) -> &str {
        self.url.rsplit('/').next().unwrap_or_default()
    }

    /// The client grab uses: short timeouts and one retry within `budget` for the whole send (two
    /// attempts of about half of it each), because a grab that already holds a ticket must answer
    /// fast; an order whose send fails waits in the outbox for reconcile. A rebuild waits longer
    /// than the budget after a loss (`REBUILD_SETTLE_MS`), so a send under way lands first.
    pub fn for_grab(sdk: &aws_config::SdkConfig, url: impl Into<String>, budget: std::time::Duration) -> Self {
        let config = aws_sdk_sqs::config::Builder::from(sdk)
            .timeout_config(
                aws_config::timeout::TimeoutConfig::builder()
                    .connect_timeout(std::time::Duration::from_millis(300))
                    .operation_attempt_timeout(budget.mul_f64(0.47))
                    .operation_timeout(budget)
                    .build(),
            )
            .retry_config(aws_config::retry::RetryConfig::standard().with_max_attempts(2))
            .build();
        Self::new(Client::from_conf(config), url)
    }

    /// Messages on the queue not yet consumed: visible, in flight and delayed. SQS gives these
    /// counts as approximate ("eventually consistent"): nothing that must be exact rests on them
    /// (docs/DESIGN.md section 10).
    pub async fn in_flight(&self) -> Result<u64, QueueError> {
        use aws_sdk_sqs::types::QueueAttributeName as A;
        if COUNTS_LIE.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(0);
        }
        let out = self
            .client
            .get_queue_attributes()
            .queue_url(&self.url)
            .attribute_names(A::ApproximateNumberOfMessages)
            .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
            .attribute_names(A::ApproximateNumberOfMessagesDelayed)
            .send()
            .await
            .map_err(|e| QueueError(crate::aws::error_summary(&e)))?;
        Ok(out.attributes().map(|a| a.values().filter_map(|v| v.parse::<u64>().ok()).sum()).unwrap_or(0))
    }

    /// Sends an order message sealed with a rotating key's current version.
    pub async fn send_sealed(&self, body: &str, keys: &StagedSecret<SealKey>) -> Result<String, QueueError> {
        let keys = keys.get().await?;
        self.send(body, &keys.current).await
    }

    /// Sends one order message, sealed with `key` (only a holder of the key can send an order mail
    /// will store); the SDK's standard retries run before this gives up.
    pub async fn send(&self, body: &str, key: &SealKey) -> Result<String, QueueError> {
        let seal = MessageAttributeValue::builder()
            .data_type("String")
            .string_value(key.seal(body))
            .build()
            .map_err(|e| QueueError(e.to_string()))?;
        let out = self
            .client
            .send_message()
            .queue_url(&self.url)
            .message_body(body)
            .message_attributes(SEAL_ATTRIBUTE, seal)
            .send()
            .await
            .map_err(|e| QueueError(crate::aws::error_summary(&e)))?;
        Ok(out.message_id.unwrap_or_default())
    }
}

/// The orders queue's dead-letter queue: messages mail failed five times. An operator moves them
/// back with reconcile (`{"redrive": "dead-letters"}`), which may send to the orders queue; the
/// queue's policy refuses every other sender, an operator's own console redrive included.
#[derive(Clone)]
pub struct DeadLetters {
    client: Client,
    url: String,
}

impl DeadLetters {
    pub fn new(client: Client, url: impl Into<String>) -> Self {
        Self { client, url: url.into() }
    }

    /// Moves up to `most` messages back to `orders`, each with its body and attributes (its seal)
    /// unchanged, and deletes each from here once it is on the orders queue. A crash between the
    /// two leaves a copy on each: mail stores an order once whatever it receives twice.
    pub async fn move_back(&self, orders: &OrderQueue, most: u32) -> Result<u32, QueueError> {
        let mut moved = 0;
        while moved < most {
            let out = self
                .client
                .receive_message()
                .queue_url(&self.url)
                .max_number_of_messages((most - moved).min(10) as i32)
                .message_attribute_names("All")
                .wait_time_seconds(0)
                .send()
                .await
                .map_err(|e| QueueError(crate::aws::error_summary(&e)))?;
            let messages = out.messages.unwrap_or_default();
            if messages.is_empty() {
                break;
            }
            for m in messages {
                orders
                    .client
                    .send_message()
                    .queue_url(&orders.url)
                    .message_body(m.body().unwrap_or_default())
                    .set_message_attributes(m.message_attributes().cloned())
                    .send()
                    .await
                    .map_err(|e| QueueError(crate::aws::error_summary(&e)))?;
                if let Some(handle) = m.receipt_handle() {
                    self.client
                        .delete_message()
                        .queue_url(&self.url)
                        .receipt_handle(handle)
                        .send()
                        .await
                        .map_err(|e| QueueError(crate::aws::error_summary(&e)))?;
                }
                moved += 1;
            }
        }
        Ok(moved)
    }
}
