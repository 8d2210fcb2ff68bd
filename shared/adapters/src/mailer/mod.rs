//! SES (v2): sends one confirmation. The sender address comes from configuration.
//!
//! SES has no idempotency key: a second `SendEmail` of the same mail is a second mail. So a send is
//! tried once by the SDK (no retry of its own) and its failure says whether the mail can have gone
//! out: SES answered with a refusal, or the connection never opened, and nothing was sent (safe to
//! send again at once); or the request left and no answer came, and the mail may be in the
//! recipient's inbox already (`MailError::Unanswered`: never sent again at once).

use std::time::Duration;

use aws_sdk_sesv2::{
    Client,
    error::SdkError,
    primitives::Blob,
    types::{Attachment, AttachmentContentDisposition, Body, Content, Destination, EmailContent, Message},
};

use domain::confirmation::{Confirmation, PASS_IMAGE_ID};

/// Why a send failed, by what it means for a second send.
#[derive(Debug, thiserror::Error)]
pub enum MailError {
    /// SES answered and did not send (a refusal, a bad request): send again when due.
    #[error("ses refused the mail: {0}")]
    Refused(String),
    /// SES answered that the account sends too fast (its rate per second): nothing was sent, and
    /// a moment later it will be.
    #[error("ses throttled the mail: {0}")]
    Throttled(String),
    /// The request never reached SES (the connection was refused, the name did not resolve, the
    /// request could not be built): nothing was sent.
    #[error("ses not reached: {0}")]
    NotSent(String),
    /// The request may have reached SES and no answer came within the send's time (or the answer
    /// could not be read, or SES failed on its side): the mail may have gone out.
    #[error("ses did not answer: {0}")]
    Unanswered(String),
}

impl MailError {
    /// Whether the mail certainly did not go out, so sending again cannot make a second mail.
    pub fn certainly_not_sent(&self) -> bool {
        !matches!(self, Self::Unanswered(_))
    }

    fn classify<E, R>(e: &SdkError<E, R>) -> Self
    where
        E: aws_sdk_sesv2::error::ProvideErrorMetadata,
        R: HttpStatus,
    {
        let summary = crate::aws::error_summary(e);
        match e {
            // An answer: SES says what it did. A 5xx may follow an accepted mail.
            SdkError::ServiceError(service) if throttled(service.raw().status_code(), service.err().code()) => {
                Self::Throttled(summary)
            }
            SdkError::ServiceError(service) if service.raw().status_code() < 500 => Self::Refused(summary),
            SdkError::ConstructionFailure(_) => Self::NotSent(summary),
            SdkError::DispatchFailure(failure) if never_connected(failure) => Self::NotSent(summary),
            _ => Self::Unanswered(summary),
        }
    }
}

/// Whether SES's answer is its sending rate (`TooManyRequestsException`, 429), not a refusal of
/// this mail. A daily quota spent (`LimitExceededException`) is a refusal: waiting seconds does not
/// lift it.
fn throttled(status: u16, code: Option<&str>) -> bool {
    status == 429 || matches!(code, Some("TooManyRequestsException" | "ThrottlingException" | "Throttling"))
}

/// The HTTP status of a raw response (the SDK's response type, or a test's).
trait HttpStatus {
    fn status_code(&self) -> u16;
}

impl HttpStatus for aws_smithy_runtime_api::http::Response {
    fn status_code(&self) -> u16 {
        self.status().as_u16()
    }
}

/// A dispatch failure from before the request could leave: no connection (refused, unreachable) or
/// no address. Anything else (a reset, a timeout) may have come after SES read the request.
fn never_connected(failure: &aws_smithy_runtime_api::client::result::DispatchFailure) -> bool {
    let Some(connector) = failure.as_connector_error() else { return false };
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(connector);
    while let Some(err) = next {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind as K;
            if matches!(
                io.kind(),
                K::ConnectionRefused | K::HostUnreachable | K::NetworkUnreachable | K::AddrNotAvailable
            ) {
                return true;
            }
        }
        if err.is::<aws_smithy_runtime_api::client::dns::ResolveDnsError>() {
            return true;
        }
        next = err.source();
    }
    false
}

#[derive(Clone)]
pub struct Mailer {
    client: Client,
    from: String,
}

fn content(text: &str) -> Result<Content, MailError> {
    Content::builder().data(text).charset("UTF-8").build().map_err(|e| MailError::NotSent(e.to_string()))
}

impl Mailer {
    pub fn new(client: Client, from: impl Into<String>) -> Self {
        Self { client, from: from.into() }
    }

    /// The SES client a mailer needs: one attempt (the SDK's retry would send a mail twice when
    /// the first answer is late) bounded by `timeout` in all; `endpoint` overrides the SDK
    /// configuration's (the local runner's fault tests put a slow SES in front of the emulator).
    pub fn client(sdk: &aws_config::SdkConfig, timeout: Duration, endpoint: Option<&str>) -> Client {
        let mut config = aws_sdk_sesv2::config::Builder::from(sdk)
            .retry_config(aws_config::retry::RetryConfig::disabled())
            // Both timeouts: a field left unset here is inherited from the shared configuration,
            // whose 2 s attempt timeout cut every slow send short (and left it unanswered).
            .timeout_config(
                aws_config::timeout::TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(1))
                    .operation_attempt_timeout(timeout)
                    .operation_timeout(timeout)
                    .build(),
            );
        if let Some(endpoint) = endpoint {
            config = config.endpoint_url(endpoint);
        }
        Client::from_conf(config.build())
    }

    /// Sends the mail once; returns SES's message id.
    pub async fn send(&self, to: &str, mail: &Confirmation) -> Result<String, MailError> {
        let mut message = Message::builder()
            .subject(content(&mail.subject)?)
            .body(Body::builder().text(content(&mail.text)?).html(content(&mail.html)?).build());
        if let Some(png) = &mail.pass_png {
            // Inline, so the HTML part shows it where it says `cid:ticket-pass`.
            let image = Attachment::builder()
                .raw_content(Blob::new(png.clone()))
                .file_name("ticket-pass.png")
                .content_type("image/png")
                .content_disposition(AttachmentContentDisposition::Inline)
                .content_id(PASS_IMAGE_ID)
                .build()
                .map_err(|e| MailError::NotSent(e.to_string()))?;
            message = message.attachments(image);
        }
        let message = message.build();
        let out = self
            .client
            .send_email()
            .from_email_address(&self.from)
            .destination(Destination::builder().to_addresses(to).build())
            .content(EmailContent::builder().simple(message).build())
            .send()
            .await
            .map_err(|e| MailError::classify(&e))?;
        Ok(out.message_id.unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::throttled;

    #[test]
    fn the_sending_rate_is_a_throttle_and_the_daily_quota_a_refusal() {
        assert!(throttled(429, Some("TooManyRequestsException")));
        assert!(throttled(400, Some("Throttling")));
        assert!(!throttled(400, Some("LimitExceededException")));
        assert!(!throttled(400, Some("MessageRejected")));
        assert!(!throttled(403, None));
    }
}
