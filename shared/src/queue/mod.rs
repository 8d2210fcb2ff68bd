//! SQS: the orders queue. The body is the order message exactly as the grab script wrote it into
//! the outbox, so the consumer can remove that outbox entry by the body it received.

use aws_sdk_sqs::Client;

#[derive(Debug, thiserror::Error)]
#[error("sqs: {0}")]
pub struct QueueError(String);

#[derive(Clone)]
pub struct OrderQueue {
    client: Client,
    url: String,
}

impl OrderQueue {
    pub fn new(client: Client, url: impl Into<String>) -> Self {
        Self { client, url: url.into() }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Sends one order message; the SDK's standard retries run before this gives up.
    pub async fn send(&self, body: &str) -> Result<String, QueueError> {
        let out = self
            .client
            .send_message()
            .queue_url(&self.url)
            .message_body(body)
            .send()
            .await
            .map_err(|e| QueueError(aws_sdk_sqs::error::DisplayErrorContext(e).to_string()))?;
        Ok(out.message_id.unwrap_or_default())
    }
}
