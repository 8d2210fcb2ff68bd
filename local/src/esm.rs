//! Plays the SQS event source mapping: polls the orders queue in batches of up to 10, hands each
//! batch to the mail handler as an SQS event, deletes the messages that succeeded and leaves the
//! failed ones, so SQS delivers them again after the visibility timeout and, after the redrive's
//! receives, moves them to the DLQ. Like a mapping's `Enabled`, it can be switched off and on at
//! run time ([`Switch`]): messages wait on the queue meanwhile.

use std::time::Duration;

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

pub struct Poller {
    pub sqs: aws_sdk_sqs::Client,
    pub queue_url: String,
    pub mail: Mail,
    pub batch_size: i32,
}

impl Poller {
    /// A poller taking batches of 10, the event source mapping's default.
    pub fn new(sqs: aws_sdk_sqs::Client, queue_url: impl Into<String>, mail: Mail) -> Self {
        Self { sqs, queue_url: queue_url.into(), mail, batch_size: 10 }
    }

    /// Polls while `switch` is on, until `stop` turns true; `pollers` batches are in flight at
    /// once, as Lambda scales.
    pub async fn run(self, pollers: usize, switch: Switch, stop: tokio::sync::watch::Receiver<bool>) {
        let this = std::sync::Arc::new(self);
        let tasks: Vec<_> = (0..pollers)
            .map(|_| {
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
