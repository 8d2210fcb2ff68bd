//! The demo event released when the runner starts, and the ready-to-paste `curl` lines.

use shared::domain::{EventDraft, event::rfc3339};
use time::{Duration, OffsetDateTime};

use crate::functions::Functions;

pub async fn release(functions: &Functions) -> Result<String, String> {
    // Whole seconds: the demo's times read cleanly in every reply.
    let now = OffsetDateTime::now_utc().replace_nanosecond(0).unwrap_or_else(|_| OffsetDateTime::now_utc());
    let id = format!("demo-{}", now.unix_timestamp());
    let draft = EventDraft::from_json(&serde_json::json!({
        "id": id,
        "title": "Rust on Lambda: a demo lecture",
        "capacity": 100,
        "sale_start": rfc3339(now),
        "sale_end": rfc3339(now + Duration::hours(24)),
        "venue": "Lecture Hall A",
        "starts_at": rfc3339(now + Duration::days(7)),
    }))
    .map_err(|e| e.to_string())?;
    functions.release.release(draft, now).await.map(|e| e.id.to_string()).map_err(|e| e.to_string())
}

pub fn print_guide(base: &str, event: Option<&str>, user_token: &str, admin_token: &str) {
    let ev = event.unwrap_or("<event id>");
    println!(
        r#"
ticket-grab local runner on {base}

  export TOKEN='{user_token}'
  export ADMIN='{admin_token}'

  # release an event (admin)
  curl -s -X POST {base}/admin/events -H "Authorization: Bearer $ADMIN" -H 'content-type: application/json' \
    -d '{{"id":"my-lecture","title":"My lecture","capacity":100,"sale_start":"'$(date -u +%FT%TZ)'","sale_end":"'$(date -u -d '+1 hour' +%FT%TZ)'"}}'
  # events and live stock
  curl -s {base}/events -H "Authorization: Bearer $TOKEN"
  curl -s {base}/events/{ev} -H "Authorization: Bearer $TOKEN"
  # the verify hash, then the grab
  HASH=$(curl -s {base}/events/{ev}/verify-hash -H "Authorization: Bearer $TOKEN" | python3 -c 'import json,sys; print(json.load(sys.stdin)["hash"])')
  curl -s -X POST {base}/events/{ev}/grab -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' -d "{{\"hash\":\"$HASH\"}}"
  # my order
  curl -s {base}/events/{ev}/order -H "Authorization: Bearer $TOKEN"
  # the attendee list (admin)
  curl -s {base}/admin/events/{ev}/orders -H "Authorization: Bearer $ADMIN"
  # the confirmation mail the local SES accepted
  cargo run -q -p local-runner -- mail --full

  # the pages (paste $ADMIN to sign in): the organiser's live page, the door's scanner, the API
  {base}/pages/organiser.html
  {base}/pages/door.html
  {base}/pages/reference.html
  # a crowd to watch on the organiser's page (it follows the newest event): 2,000 fans, 100 tickets
  cargo run -q --release -p loadgen -- custom --users 2000 --tickets 100 --base-url {base}
"#
    );
}
