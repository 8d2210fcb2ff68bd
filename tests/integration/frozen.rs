//! A warm environment frozen before the open, as Lambda freezes one between requests: its
//! connections may be dead when it thaws (the server or the network closed them meanwhile), its
//! keys older than `kept`, and Secrets Manager may not answer (a burst of reads at the open). Its
//! first request after thawing must answer as a fresh environment would, without waiting on either.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use shared::{config::HashSettings, domain::verify_hash::HashKey, http::routes::Function, secrets::StagedSecret};

use crate::{
    faults::{PrivateRedis, app_on_private_redis},
    helpers::*,
    partial_loss::assert_exact_after,
};

/// How long the thawed environment's first grab may take, at most: a new cache connection and the
/// grab (milliseconds each here), with room for a loaded machine; far below a read of Secrets
/// Manager that never comes back, or a 503 and the user's retry.
const FIRST_REQUEST_BOUND: Duration = Duration::from_secs(3);

/// The test's app on its own redis-server; `None` in cluster mode, where cutting connections would
/// cut other tests' (the cluster client reconnects by itself).
async fn standalone_app(redis: &PrivateRedis) -> Option<Arc<crate::helpers::TestApp>> {
    let app = app_on_private_redis(redis).await;
    (!app.settings.gate.cluster).then_some(app)
}

/// Every order delivered, then the sale exact: each user told a number holds it, nothing twice.
async fn assert_exact_for<const N: usize>(
    app: &crate::helpers::TestApp,
    event: &shared::domain::EventId,
    told: [(&str, &Reply); N],
) {
    app.deliver_all().await;
    let told: BTreeMap<String, u32> = told
        .into_iter()
        .map(|(user, reply)| (user.to_owned(), reply.body["ticket_no"].as_u64().unwrap() as u32))
        .collect();
    assert_exact_after(app, event, &told, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_environment_thawed_with_its_connections_cut_and_secrets_manager_silent_answers_its_first_grab() {
    let redis = PrivateRedis::start().await;
    let Some(app) = standalone_app(&redis).await else { return };
    // The environment's hash key, read from Secrets Manager through a network the test shuts, and
    // kept a second.
    let sm = aws_sdk_secretsmanager::Client::new(&app.sdk);
    let value = format!("the frozen environment's hash key {}", uuid::Uuid::now_v7().simple());
    let id = format!("hash-frozen-{}", uuid::Uuid::now_v7().simple());
    sm.create_secret().name(&id).secret_string(&value).send().await.unwrap();
    let (far, valve) = local_runner::network::valve_network(&app.settings.aws_endpoint).await.expect("a network");
    let kept = Duration::from_secs(1);
    let mut settings = app.settings.clone();
    settings.hash = HashSettings {
        keys: StagedSecret::secret(
            &app.sdk.to_builder().endpoint_url(far).build(),
            &id,
            |s| HashKey::new(s.as_bytes()),
            kept,
        ),
        ..app.settings.hash.clone()
    };
    let environment = Arc::new(local_runner::Functions::build(&settings, &app.queue_url).await.expect("functions"));
    let key = HashKey::new(value.as_bytes()).unwrap();
    let event = app.open_event(3).await;
    let grab = |user: &str| {
        let expires = shared::domain::event::epoch_ms(time::OffsetDateTime::now_utc() + time::Duration::minutes(10));
        let hash = key.issue(&event, &shared::domain::UserId::parse(user).unwrap(), expires);
        let request =
            for_user(with_body(for_event(fixture("grab.json"), &event), &serde_json::json!({ "hash": hash })), user);
        let environment = environment.clone();
        async move { call_with(&environment, Function::Grab, request).await }
    };

    // Warm: its keys read, its cache connection made.
    let bob = grab("bob").await;
    assert_eq!(bob.status, 202, "{}", bob.body);

    // Frozen past its keys' `kept` (and the 5 s an environment used to serve them while reading)
    // and past the idle time after which a connection is asked before it is used; meanwhile the
    // server cuts its connections, and Secrets Manager stops answering.
    tokio::time::sleep(kept + Duration::from_secs(6)).await;
    let mut r = app.redis.clone();
    let cut: u64 =
        redis::cmd("CLIENT").arg(&["KILL", "TYPE", "normal", "SKIPME", "yes"][..]).query_async(&mut r).await.unwrap();
    assert!(cut >= 1, "the environment's connection cut");
    valve.shut();

    let ada = tokio::time::timeout(FIRST_REQUEST_BOUND, grab("ada"))
        .await
        .expect("the thawed environment's first grab waited (on Secrets Manager, or a dead connection)");
    assert_eq!(ada.status, 202, "the first grab after the thaw: {}", ada.body);
    // Its keys are being read again, in the background.
    tokio::time::timeout(Duration::from_secs(10), valve.held(1)).await.expect("the keys read again in the background");
    valve.open();

    assert_exact_for(&app, &event, [("bob", &bob), ("ada", &ada)]).await;
}

/// The same thaw, the connection dead without a word (a NAT that forgot the flow, a frozen peer:
/// no FIN, no RST): its `PING` waits out the command timeout, a new connection is made, and the
/// first grab is answered within the bound, on the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_environment_thawed_with_its_connection_silently_dead_answers_its_first_grab() {
    let redis = PrivateRedis::start().await;
    let Some(app) = standalone_app(&redis).await else { return };
    let (near, severable) =
        local_runner::network::severable_network(&format!("127.0.0.1:{}", redis.port)).await.expect("a network");
    let mut settings = app.settings.clone();
    settings.gate.redis_url = near.replace("http://", "redis://");
    let (event, bob, ada) = grabs_across_a_silent_thaw(&app, &settings, &severable).await;

    assert_exact_for(&app, &event, [("bob", &bob), ("ada", &ada)]).await;
}

/// An environment of `settings` (its cache reached through `severable`'s path) grabs once, stands
/// idle past the time after which a connection is asked before it is used while its path goes
/// silent, and grabs again: the event and both replies, each `202`, the second within the bound.
async fn grabs_across_a_silent_thaw(
    app: &crate::helpers::TestApp,
    settings: &local_runner::settings::LocalSettings,
    severable: &local_runner::network::Severable,
) -> (shared::domain::EventId, Reply, Reply) {
    let environment = Arc::new(local_runner::Functions::build(settings, &app.queue_url).await.expect("functions"));
    let event = app.open_event(3).await;
    let grab = |user: &str| {
        let body = serde_json::json!({ "hash": app.hash_for(&event, user) });
        let request = for_user(with_body(for_event(fixture("grab.json"), &event), &body), user);
        let environment = environment.clone();
        async move { call_with(&environment, Function::Grab, request).await }
    };
    let bob = grab("bob").await;
    assert_eq!(bob.status, 202, "{}", bob.body);
    // Idle 5 s past its last command: the grab's, then its tally's write a second later.
    tokio::time::sleep(Duration::from_secs(7)).await;
    severable.sever();
    let ada = tokio::time::timeout(FIRST_REQUEST_BOUND, grab("ada"))
        .await
        .expect("the thawed environment's first grab waited on its dead connection");
    assert_eq!(ada.status, 202, "the first grab after the thaw: {}", ada.body);
    (event, bob, ada)
}

/// The same silent death in cluster mode: the environment's cluster connection (to every primary)
/// goes silent while it stands idle; asked a `PING` on a primary first, it is replaced, and the
/// first grab after the thaw is answered within the bound on the new one. The node announces the
/// severable path's port, so every connection the cluster client makes to it goes that way.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cluster_environment_thawed_with_its_connection_silently_dead_answers_its_first_grab() {
    let (node, mut admin) = cluster_node().await;
    let (near, severable) =
        local_runner::network::severable_network(&format!("127.0.0.1:{}", node.port)).await.expect("a network");
    let proxied = near.replace("http://", "redis://");
    announce(&mut admin, &near).await;
    let _: () = redis::cmd("CLUSTER").arg("ADDSLOTSRANGE").arg(0).arg(16383).query_async(&mut admin).await.unwrap();
    let formed = eventually(Duration::from_secs(10), || {
        let mut admin = admin.clone();
        async move {
            let info: String = redis::cmd("CLUSTER").arg("INFO").query_async(&mut admin).await.unwrap_or_default();
            info.contains("cluster_state:ok")
        }
    })
    .await;
    assert!(formed, "the one-node cluster did not form");

    let app = TestApp::for_mail_with(1, |s| {
        s.gate.redis_url = proxied.clone();
        s.gate.cluster = true;
    })
    .await;
    let (_, bob, ada) = grabs_across_a_silent_thaw(&app, &app.settings, &severable).await;
    assert_ne!(ada.body["ticket_no"], bob.body["ticket_no"], "two users, two numbers");
}

/// A cluster node of the test's own, cluster mode on, and a connection to administer it.
async fn cluster_node() -> (PrivateRedis, redis::aio::MultiplexedConnection) {
    let conf = format!("/tmp/tg-node-{}.conf", uuid::Uuid::now_v7().simple());
    let node = PrivateRedis::start_with(&[
        "--cluster-enabled".into(),
        "yes".into(),
        "--cluster-config-file".into(),
        conf,
        "--cluster-announce-ip".into(),
        "127.0.0.1".into(),
    ])
    .await;
    let admin = redis::Client::open(crate::faults::redis_info(&node.url()))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    (node, admin)
}

/// The node announces the path `near` (a severable network's) for its clients' connections.
async fn announce(admin: &mut redis::aio::MultiplexedConnection, near: &str) {
    let port: u16 = near.rsplit(':').next().and_then(|p| p.parse().ok()).expect("the path's port");
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("cluster-announce-port").arg(port).query_async(admin).await.unwrap();
}
