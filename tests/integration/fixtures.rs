//! The sample events in `events/` are what `cargo lambda invoke`, `sam local invoke` and these
//! tests use: each must be a valid HTTP API event for a real route, or a release payload.

use aws_lambda_events::apigw::ApiGatewayV2httpRequest;
use shared::{domain::EventDraft, http::routes};

use crate::helpers::{fixture, repo_root};

#[test]
fn every_sample_event_parses_and_names_a_real_route() {
    let mut seen = 0;
    for entry in std::fs::read_dir(repo_root().join("events")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let value = fixture(&name);
        seen += 1;
        if name.starts_with("release-direct") {
            let parsed = EventDraft::from_json(&value);
            assert_eq!(parsed.is_ok(), !name.contains("bad"), "{name}: {parsed:?}");
            continue;
        }
        let event: ApiGatewayV2httpRequest = serde_json::from_value(value).unwrap_or_else(|e| panic!("{name}: {e}"));
        let key = event.request_context.route_key.clone().unwrap_or_default();
        let path = event.raw_path.clone().unwrap_or_default();
        let method = event.request_context.http.method.as_str().to_owned();
        let (route, _) = routes::find(&method, &path.replace("%23", "x"))
            .unwrap_or_else(|| panic!("{name}: no route for {method} {path}"));
        assert_eq!(route.key(), key, "{name}");
        assert_eq!(event.route_key.as_deref(), Some(key.as_str()), "{name}");
    }
    assert!(seen >= 12, "only {seen} sample events");
}
