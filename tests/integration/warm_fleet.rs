//! The warm fleet at an open (docs/DESIGN.md section 12), against the emulator's Lambda and SES:
//! provisioned concurrency converged on functions and aliases made there, a release answered with
//! its fleet and the account's warnings, reconcile provisioning it, bad rates refused.

use aws_sdk_lambda::{
    Client as Lambda,
    primitives::Blob,
    types::{FunctionCode, Runtime},
};
use serde_json::{Value, json};
use shared::{
    domain::{
        EventId,
        warm_fleet::{self, DeploymentLimits, FleetSize},
    },
    fleet::{ALIAS, Converged, Fleet, FleetTargets, LimitsReader},
    handlers::{reconcile::Reconcile, release::Release},
    http::routes::Function,
};
use time::{Duration, OffsetDateTime};

use crate::helpers::{TestApp, fixture, fresh_event_id, with_body};

/// The smallest zip there is (an end-of-central-directory record alone): the emulator stores the
/// code and never runs it here.
const EMPTY_ZIP: [u8; 22] = [0x50, 0x4b, 0x05, 0x06, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];

/// A function with a published version and the alias the template gives grab and verify-hash.
async fn function_with_alias(lambda: &Lambda, name: &str) {
    lambda
        .create_function()
        .function_name(name)
        .runtime(Runtime::Providedal2023)
        .handler("bootstrap")
        .role("arn:aws:iam::000000000000:role/warm-fleet-test")
        .code(FunctionCode::builder().zip_file(Blob::new(EMPTY_ZIP.to_vec())).build())
        .send()
        .await
        .expect("create function");
    let version = lambda.publish_version().function_name(name).send().await.expect("publish version");
    lambda
        .create_alias()
        .function_name(name)
        .name(ALIAS)
        .function_version(version.version().expect("a version"))
        .send()
        .await
        .expect("create alias");
}

/// Grab and verify-hash stand-ins of the test's own, so no other test's fleet is seen.
async fn targets(app: &TestApp) -> (Lambda, FleetTargets) {
    let lambda = Lambda::new(&app.sdk);
    let run = uuid::Uuid::now_v7().simple().to_string();
    let targets = FleetTargets {
        grab: format!("grab-{run}"),
        verify_hash: format!("verify-hash-{run}"),
        alias: ALIAS.to_owned(),
    };
    function_with_alias(&lambda, &targets.grab).await;
    function_with_alias(&lambda, &targets.verify_hash).await;
    (lambda, targets)
}

async fn provisioned(fleet: &Fleet, targets: &FleetTargets) -> FleetSize {
    FleetSize {
        grab: fleet.provisioned(&targets.grab).await.expect("read grab's"),
        verify_hash: fleet.provisioned(&targets.verify_hash).await.expect("read verify-hash's"),
    }
}

#[tokio::test]
async fn the_fleet_is_set_left_alone_grown_and_removed_on_the_alias() {
    let app = TestApp::new().await;
    let (_, targets) = targets(&app).await;
    let fleet = Fleet::new(&app.sdk, targets.clone(), DeploymentLimits::default());
    assert_eq!(provisioned(&fleet, &targets).await, FleetSize::default(), "a new alias has none");

    let size = FleetSize { grab: 30, verify_hash: 8 };
    assert_eq!(fleet.converge(size).await.unwrap(), Converged { size, writes: 2 });
    assert_eq!(provisioned(&fleet, &targets).await, size);
    assert_eq!(fleet.converge(size).await.unwrap().writes, 0, "as wanted: nothing is written");

    let grown = FleetSize { grab: 50, verify_hash: 0 };
    assert_eq!(fleet.converge(grown).await.unwrap().writes, 2);
    assert_eq!(provisioned(&fleet, &targets).await, grown, "grown, and verify-hash's removed");
    assert_eq!(fleet.converge(FleetSize::default()).await.unwrap().writes, 1);
    assert_eq!(provisioned(&fleet, &targets).await, FleetSize::default());

    let missing = FleetTargets { grab: format!("{}-gone", targets.grab), ..targets };
    let err = Fleet::new(&app.sdk, missing, DeploymentLimits::default()).converge(size).await.unwrap_err();
    assert!(err.to_string().contains("GetProvisionedConcurrencyConfig"), "{err}");
}

/// A release body opening in `opens_in` with an expected rate.
fn rush(id: &EventId, capacity: u32, opens_in: Duration, rate: Value) -> Value {
    let start = OffsetDateTime::now_utc() + opens_in;
    json!({
        "id": id.as_str(), "title": "A rush", "capacity": capacity,
        "sale_start": shared::domain::event::rfc3339(start),
        "sale_end": shared::domain::event::rfc3339(start + Duration::hours(1)),
        "expected_rate": rate,
    })
}

fn codes(reply: &Value) -> Vec<String> {
    reply["warnings"].as_array().into_iter().flatten().map(|w| w["code"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn a_release_with_a_rate_is_answered_with_its_fleet_and_reconcile_provisions_it() {
    let app = TestApp::new().await;
    let id = fresh_event_id();
    // Within the lead: reconcile provisions it now.
    let body = rush(&id, 20_000, warm_fleet::LEAD - Duration::minutes(1), json!(100_000));
    let reply = app.call(Function::Release, with_body(fixture("release-http.json"), &body)).await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let fleet_reply = &reply.body["warm_fleet"];
    assert_eq!((fleet_reply["grab"].as_u64(), fleet_reply["verify_hash"].as_u64()), (Some(12_000), Some(10_000)));
    let stored = app.functions.store.get_event(&id).await.unwrap().expect("stored").event;
    assert_eq!(stored.expected_rate, Some(100_000));
    assert_eq!(fleet_reply["from"], shared::domain::event::rfc3339(stored.sale_start - warm_fleet::LEAD));
    assert_eq!(fleet_reply["until"], shared::domain::event::rfc3339(stored.sale_start + warm_fleet::TAIL));
    // The emulator's account: Lambda's concurrency below the fleet, SES at 14 mails/s.
    let warned = codes(&reply.body);
    for code in ["API_ACCOUNT_RATE", "ACCOUNT_CONCURRENCY", "MAIL_DRAIN"] {
        assert!(warned.iter().any(|w| w == code), "{code} in {warned:?}");
    }
    assert!(!warned.iter().any(|w| w == "LIMITS_UNKNOWN"), "the emulator's limits were read: {warned:?}");
    // The public event shows the rate it was released with.
    let public = app.call(Function::Query, crate::helpers::for_event(fixture("query-event.json"), &id)).await;
    assert_eq!(public.body["expected_rate"], 100_000, "{}", public.body);

    // Reconcile keeps the fleet: every open in its window now, this one's among them.
    let (_, targets) = targets(&app).await;
    let fleet = Fleet::new(&app.sdk, targets.clone(), DeploymentLimits::default());
    let reconcile = Reconcile::new(
        app.functions.store.clone(),
        app.functions.gate.clone(),
        app.functions.queue.clone(),
        app.settings.seal_keys(),
        app.settings.rebuild,
        app.settings.reconcile,
        Some(fleet.clone()),
    );
    let report = reconcile.run().await;
    let kept = report.fleet.expect("reconcile kept the fleet").size;
    assert_eq!(provisioned(&fleet, &targets).await, kept, "what the report says is what the emulator holds");
    assert!(kept.grab >= 12_000 && kept.verify_hash >= 10_000, "{kept:?}");
}

#[tokio::test]
async fn a_bad_rate_is_refused_naming_it_and_nothing_is_stored() {
    let app = TestApp::new().await;
    for bad in [json!(0), json!(1_000_001), json!("fast"), json!(1.5), json!(-3)] {
        let id = fresh_event_id();
        let body = rush(&id, 100, Duration::minutes(5), bad.clone());
        let reply = app.call(Function::Release, with_body(fixture("release-http.json"), &body)).await;
        assert_eq!(reply.status, 400, "{bad}: {}", reply.body);
        assert_eq!(reply.body["code"], "INVALID_EVENT");
        assert_eq!(reply.body["errors"][0]["field"], "expected_rate", "{bad}: {}", reply.body);
        assert!(app.functions.store.get_event(&id).await.unwrap().is_none(), "{bad}: nothing stored");
    }
}

#[tokio::test]
async fn an_account_that_cannot_be_read_is_named_not_a_failure() {
    let app = TestApp::new().await;
    // Nothing listens on port 9 of loopback: every read of the account fails at once.
    let nowhere = app.sdk.to_builder().endpoint_url("http://127.0.0.1:9").build();
    let release = Release::new(
        app.functions.store.clone(),
        app.functions.gate.clone(),
        app.functions.rebuilder.clone(),
        app.courier(),
        LimitsReader::new(&nowhere),
        DeploymentLimits { grab_route: Some(2_000), ..Default::default() },
        app.settings.beacon_chains.clone(),
        app.settings.hash.receipts.clone(),
    );
    let id = fresh_event_id();
    let draft = shared::domain::EventDraft::from_json(&rush(&id, 100, Duration::minutes(5), json!(3_000))).unwrap();
    let event = release.release(draft, OffsetDateTime::now_utc()).await.expect("released all the same");
    let reply = release.reply(&event).await;
    assert_eq!(codes(&reply), ["GRAB_ROUTE_THROTTLE", "LIMITS_UNKNOWN"], "{reply}");
    assert!(app.functions.gate.window(&id).await.unwrap().is_some(), "the sale is warmed");
}

/// A provisioned environment connects to the cache in its init, so the open's first requests pay
/// no handshake; an on-demand one connects at its first request (its init stays as light as the
/// hello's). Counted on a redis-server of the test's own: its clients are this test's alone.
#[tokio::test]
async fn a_provisioned_environment_connects_in_init_and_an_on_demand_one_at_its_first_request() {
    use shared::setup::{Adapters, Init};

    let redis = crate::faults::PrivateRedis::start().await;
    let mut settings = shared::config::GateSettings::for_url(redis.url()).unwrap();
    settings.cluster = false;
    settings.auth_token = Some(crate::faults::redis_token());
    let mut watcher = redis::Client::open(crate::faults::redis_info(&redis.url()))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let mut clients = async || {
        let list: String = redis::cmd("CLIENT").arg("LIST").query_async(&mut watcher).await.unwrap();
        list.lines().count() - 1
    };
    let adapters = Adapters::new(aws_config::SdkConfig::builder().build());

    let provisioned = adapters.gate_for(&settings, Init::Provisioned).await.unwrap();
    assert_eq!(clients().await, 1, "the provisioned environment is connected before any request");
    let on_demand = adapters.gate_for(&settings, Init::OnDemand).await.unwrap();
    assert_eq!(clients().await, 1, "an on-demand init makes no connection");

    let event = crate::helpers::fresh_event_id();
    for gate in [&provisioned, &on_demand] {
        assert_eq!(gate.stock(&event).await.unwrap(), None);
    }
    assert_eq!(clients().await, 2, "the provisioned one's first request used the connection made in init");
}

/// The events a warm fleet is for, named in the cache by reconcile, are read by a provisioned
/// verify-hash environment at its init: its first request at the open then reads nothing from
/// DynamoDB (here held shut: a request that needed it would wait past the bound).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provisioned_verify_hash_holds_its_fleets_events_before_the_open() {
    // A cache of the test's own: `fleet:warming` is one key, which another test's reconcile
    // (with a fleet) writes too.
    let redis = crate::faults::PrivateRedis::start().await;
    let app = crate::faults::app_on_private_redis(&redis).await;
    if app.settings.gate.cluster {
        return;
    }
    let event = app.open_event(5).await;
    let (far, valve) = local_runner::network::valve_network(&app.settings.aws_endpoint).await.expect("a network");
    let mut settings = app.settings.clone();
    settings.aws_endpoint = far;
    let environment = local_runner::Functions::build(&settings, &app.queue_url).await.expect("functions");
    app.functions.gate.set_warming(&[&event], std::time::Duration::from_secs(60)).await.unwrap();
    assert_eq!(environment.gate.warming().await.unwrap(), vec![event.clone()], "the events the fleet is for");
    assert_eq!(environment.verify_hash.warm_up().await, 1, "the event read at init");

    valve.shut();
    let request = crate::helpers::for_user(crate::helpers::for_event(fixture("verify-hash.json"), &event), "ada");
    let reply = tokio::time::timeout(
        std::time::Duration::from_secs(3),
        crate::helpers::call_with(&environment, Function::VerifyHash, request),
    )
    .await
    .expect("the first request read DynamoDB");
    assert_eq!(reply.status, 200, "{}", reply.body);
    valve.open();
    app.functions.gate.set_warming(&[], std::time::Duration::from_secs(1)).await.unwrap();
    assert!(app.functions.gate.warming().await.unwrap().is_empty(), "no fleet, no events named");
}

/// A provisioned grab environment makes its fleet's events ready at its init too: each event read
/// (a red packet's split made from it) and its buckets' layout. Its first win then needs nothing
/// of DynamoDB: here the event's item is taken away after the warm-up, and the winner is still
/// told its amount (read at the first win, as before the warm-up, it would be left out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provisioned_grab_holds_its_fleets_events_before_the_open() {
    let redis = crate::faults::PrivateRedis::start().await;
    let app = crate::faults::app_on_private_redis(&redis).await;
    if app.settings.gate.cluster {
        return;
    }
    let id = fresh_event_id();
    let opens = OffsetDateTime::now_utc();
    let packets = json!({
        "id": id.as_str(), "title": "Red packets, warm", "capacity": 10,
        "sale_start": shared::domain::event::rfc3339(opens),
        "sale_end": shared::domain::event::rfc3339(opens + Duration::hours(1)),
        "total_amount": 1_000, "currency": "CNY",
    });
    let released = app.call(Function::Release, with_body(fixture("release-http.json"), &packets)).await;
    assert_eq!(released.status, 201, "{}", released.body);
    let environment = local_runner::Functions::build(&app.settings, &app.queue_url).await.expect("functions");
    app.functions.gate.set_warming(&[&id], std::time::Duration::from_secs(60)).await.unwrap();
    assert_eq!(environment.grab.warm_up().await, 1, "the event and its buckets read at init");

    let store = &app.functions.store;
    let key = [("PK", shared::store::schema::key::event(&id)), ("SK", shared::store::schema::key::EVENT_SK.to_owned())];
    let key = key.map(|(k, v)| (k.to_owned(), aws_sdk_dynamodb::types::AttributeValue::S(v))).into();
    store.client().delete_item().table_name(store.table()).set_key(Some(key)).send().await.unwrap();
    let body = json!({ "hash": app.hash_for(&id, "ada") });
    let request =
        crate::helpers::for_user(with_body(crate::helpers::for_event(fixture("grab.json"), &id), &body), "ada");
    let reply = crate::helpers::call_with(&environment, Function::Grab, request).await;
    assert_eq!(reply.status, 202, "{}", reply.body);
    assert!(reply.body["amount"]["value"].as_u64().is_some_and(|v| v > 0), "the amount, from memory: {}", reply.body);
    app.functions.gate.set_warming(&[], std::time::Duration::from_secs(1)).await.unwrap();
}
