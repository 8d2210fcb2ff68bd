//! SES (v2): sends one confirmation. The sender address comes from configuration.

use aws_sdk_sesv2::{
    Client,
    primitives::Blob,
    types::{Attachment, AttachmentContentDisposition, Body, Content, Destination, EmailContent, Message},
};

use crate::domain::confirmation::{Confirmation, PASS_IMAGE_ID};

#[derive(Debug, thiserror::Error)]
#[error("ses: {0}")]
pub struct MailError(String);

#[derive(Clone)]
pub struct Mailer {
    client: Client,
    from: String,
}

fn content(text: &str) -> Result<Content, MailError> {
    Content::builder().data(text).charset("UTF-8").build().map_err(|e| MailError(e.to_string()))
}

impl Mailer {
    pub fn new(client: Client, from: impl Into<String>) -> Self {
        Self { client, from: from.into() }
    }

    /// Sends the mail; returns SES's message id.
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
                .map_err(|e| MailError(e.to_string()))?;
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
            .map_err(|e| MailError(crate::aws::error_summary(&e)))?;
        Ok(out.message_id.unwrap_or_default())
    }
}
