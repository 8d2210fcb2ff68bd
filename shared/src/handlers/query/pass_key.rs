//! `GET /events/{id}/pass-key`: the public keys a door checks ticket passes with (current, and next
//! and previous around a rotation).

use lambda_http::{Body, Response, http::StatusCode};

use super::Query;
use crate::{
    domain::EventId,
    http::{ApiError, json},
};

impl Query {
    pub(super) async fn pass_key(&self, event: &EventId) -> Result<Response<Body>, ApiError> {
        self.rebuilder.event(event).await?.ok_or(ApiError::EventNotFound)?;
        let keys = self.pass.get().await.map_err(|e| {
            tracing::error!(dependency = "secretsmanager", error = %e, "pass keys unavailable");
            ApiError::Busy
        })?;
        let published = |k: &crate::domain::ticket_pass::PublicPassKey| serde_json::json!({ "key_id": k.id(), "public_key": k.encoded() });
        Ok(json(
            StatusCode::OK,
            &serde_json::json!({
                "event_id": event,
                "algorithm": "Ed25519",
                "key_id": keys.current.id(),
                "public_key": keys.current.encoded(),
                "next": keys.next.as_ref().map(published),
                "previous": keys.previous.as_ref().map(published),
                "format": "TP2.<base64url payload {k,e,o,n}>.<base64url signature over \"ticket-pass-v2\\n\" + payload>; k names the key",
            }),
        ))
    }
}
