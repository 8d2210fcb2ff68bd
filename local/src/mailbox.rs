//! The mail MiniStack accepted, read back from `GET /_ministack/ses/messages`: how developers and
//! the tests see what was sent.

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct SentMail {
    pub message_id: String,
    pub source: String,
    #[serde(default)]
    pub to: Vec<String>,
    #[serde(default)]
    pub subject: String,
    #[serde(default)]
    pub body_text: String,
    #[serde(default)]
    pub body_html: Option<String>,
    /// Seconds since the epoch, as MiniStack records them.
    #[serde(default)]
    pub timestamp: f64,
}

#[derive(Deserialize)]
struct Listing {
    messages: std::collections::HashMap<String, Vec<SentMail>>,
}

/// Every mail the emulator accepted, all accounts.
pub async fn sent(aws_endpoint: &str) -> Result<Vec<SentMail>, String> {
    let url = format!("{}/_ministack/ses/messages", aws_endpoint.trim_end_matches('/'));
    let listing: Listing = crate::client::new()
        .get(&url)
        .send()
        .await
        .map_err(|e| format!("{url}: {e}"))?
        .error_for_status()
        .map_err(|e| format!("{url}: {e}"))?
        .json()
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    Ok(listing.messages.into_values().flatten().collect())
}
