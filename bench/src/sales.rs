//! An open sale as the benchmarks make it, and its users' grab events.

use serde_json::{Value, json};
use shared::domain::{Event, EventId, UserId};
use time::OffsetDateTime;

/// An event on sale from `sale_start` for an hour, with nothing else set (no venue, no waitlist).
pub fn open_event(id: EventId, title: &str, capacity: u32, sale_start: OffsetDateTime) -> Event {
    let now = OffsetDateTime::now_utc();
    let end = now + time::Duration::hours(1);
    Event {
        id,
        title: title.into(),
        capacity,
        sale_start,
        sale_end: end,
        venue: None,
        starts_at: None,
        description: None,
        cancel_until: end,
        waitlist_size: 0,
        check_in_from: None,
        check_in_until: None,
        expected_rate: None,
        buckets: 1,
        red_packet: None,
        sale_mode: Default::default(),
        draw: None,
        queue: None,
        created_at: now,
    }
}

/// The gate as the benchmarks drive it: generous timeouts (a round may queue thousands of calls),
/// no sold-out memory (every grab runs the script), no reader.
pub fn gate_settings(url: &str, cluster: bool, token: Option<String>) -> shared::config::GateSettings {
    use std::time::Duration;
    shared::config::GateSettings {
        redis_url: url.to_owned(),
        cluster,
        connect_timeout: Duration::from_secs(5),
        command_timeout: Duration::from_secs(60),
        replica_wait: Duration::from_millis(100),
        auth_token: token,
        reader_url: None,
        sold_out_memory: Duration::ZERO,
        reader_refresh: Duration::from_secs(60),
    }
}

/// An open sale and what it takes to build its users' grab events.
pub struct Sale {
    pub event: EventId,
    pub hash: shared::config::HashSettings,
    pub expires_ms: i64,
    /// `events/grab.json`, the sample every request is made from.
    pub template: Value,
}

impl Sale {
    /// A sale of `event` whose users' hashes last an hour.
    pub fn new(event: EventId, hash: shared::config::HashSettings) -> Result<Self, serde_json::Error> {
        Ok(Self {
            event,
            hash,
            expires_ms: shared::domain::event::epoch_ms(OffsetDateTime::now_utc() + time::Duration::hours(1)),
            template: serde_json::from_str(include_str!("../../events/grab.json"))?,
        })
    }

    /// A grab event as API Gateway delivers it: the user's claims and a valid verify hash.
    pub fn request(&self, user: &str) -> String {
        let hash = self.hash.keys.last().expect("the hash keys").current.issue(
            &self.event,
            &UserId::parse(user).expect("a valid id"),
            self.expires_ms,
        );
        let path = format!("/events/{}/grab", self.event);
        let mut e = self.template.clone();
        e["rawPath"] = json!(path);
        e["requestContext"]["http"]["path"] = json!(path);
        e["pathParameters"]["id"] = json!(self.event);
        e["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = json!(user);
        e["requestContext"]["authorizer"]["jwt"]["claims"]["email"] = json!(format!("{user}@example.com"));
        e["body"] = json!(json!({ "hash": hash }).to_string());
        e.to_string()
    }
}
