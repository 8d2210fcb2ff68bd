//! Refusals without the script (docs/DESIGN.md section 6), on a primary and its replica of the
//! test's own: once the script has said `SOLD_OUT` and the replica holds every holding, a grab is
//! answered from the user's field read on the replica (the holder gets their order, a user who
//! cancelled is told so, everyone else `SOLD_OUT`) with nothing run or written on the primary; a
//! number freed meanwhile waits for the memory's end, then sells; a lagging replica keeps the
//! script deciding.

use std::time::{Duration, Instant};

use crate::{failover::Pair, faults::*, helpers::*};

/// How often a command ran on a server since its counters were reset (`INFO commandstats`).
pub(crate) async fn calls(conn: &mut redis::aio::MultiplexedConnection, command: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query_async(conn).await.unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:calls=")))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The script runs and the reads and writes of a user's field a server ran since its counters
/// were reset: what a refusal must not cost the primary.
pub(crate) const SCRIPT_AND_FIELD_COMMANDS: [&str; 7] =
    ["evalsha", "eval", "hget", "hmget", "hset", "hincrby", "hsetnx"];

/// [`calls`] of each of `commands`, added up.
pub(crate) async fn calls_of(conn: &redis::aio::MultiplexedConnection, commands: &[&str]) -> u64 {
    let counted = futures::future::join_all(commands.iter().map(|c| {
        let mut conn = conn.clone();
        async move { calls(&mut conn, c).await }
    }))
    .await;
    counted.into_iter().sum()
}

pub(crate) async fn reset(conn: &mut redis::aio::MultiplexedConnection) {
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query_async(conn).await.unwrap();
}

/// Long enough that the crowd below is refused within it on a loaded machine (40 grabs once took
/// more than 6 s while the whole suite ran), short enough to wait out.
const MEMORY: Duration = Duration::from_secs(10);

/// A primary and its replica, and the functions reading refusals on the replica.
async fn with_reader() -> (Pair, std::sync::Arc<TestApp>) {
    let pair = Pair::start().await;
    let replica_url = pair.replica.url();
    let app = app_on_redis_with(pair.endpoint.url(), 30, move |s| {
        s.gate.reader_url = Some(replica_url);
        s.gate.sold_out_memory = MEMORY;
    })
    .await;
    (pair, app)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sold_out_event_is_refused_on_the_replica_with_nothing_run_on_the_primary() {
    logs_when_asked();
    let (pair, app) = with_reader().await;
    let (mut primary, mut replica) = (pair.direct(&pair.primary).await, pair.direct(&pair.replica).await);
    let event = app.open_event(2).await;
    let ada = app.grab(&event, "ada").await;
    assert_eq!(ada.status, 202);
    assert_eq!(app.grab(&event, "bob").await.status, 202);
    app.deliver_all().await;
    // The script says SOLD_OUT; the replica holds everything: the memory starts.
    assert_eq!(app.grab(&event, "cy").await.code(), "SOLD_OUT");
    let remembered_at = Instant::now();

    reset(&mut primary).await;
    reset(&mut replica).await;
    let crowd: Vec<String> = (0..20).map(|i| format!("fan-{i}")).collect();
    for fan in &crowd {
        assert_eq!(app.grab(&event, fan).await.code(), "SOLD_OUT", "{fan}");
    }
    let again = app.grab(&event, "ada").await;
    assert_eq!(
        (again.status, &again.body["order_id"]),
        (200, &ada.body["order_id"]),
        "the holder gets their order back"
    );
    assert!(
        remembered_at.elapsed() < MEMORY,
        "the crowd was refused within the memory (it took {:?}): past it the script decides again",
        remembered_at.elapsed()
    );
    let on_primary = calls_of(&primary, &SCRIPT_AND_FIELD_COMMANDS).await;
    assert_eq!(on_primary, 0, "21 refusals ran nothing and wrote nothing on the primary");
    assert_eq!(calls(&mut replica, "hmget").await, 21, "one read of the user's field each, on the replica");
    // The users' fields (`=<user>`): the give-back below adds an event field (`arrivals`), no user's.
    let user_fields = async |primary: &mut redis::aio::MultiplexedConnection| {
        let names: Vec<String> = redis::AsyncCommands::hkeys(primary, shared::gate::keys::meta(&event)).await.unwrap();
        names.iter().filter(|n| n.starts_with('=')).count()
    };
    let fields = user_fields(&mut primary).await;

    // Bob gives his ticket back: nobody waits, so it is free again, on the primary. Within the
    // memory bob is told he cancelled, and a fan is still told SOLD_OUT (the number waits for the
    // memory's end: docs/DESIGN.md section 6).
    assert_eq!(app.cancel(&event, "bob").await.status, 200);
    pair.caught_up().await;
    assert_eq!(app.grab(&event, "bob").await.code(), "ORDER_CANCELLED");
    assert_eq!(app.grab(&event, "eve").await.code(), "SOLD_OUT");
    assert!(
        remembered_at.elapsed() < MEMORY,
        "the checks above ran within the memory (it took {:?})",
        remembered_at.elapsed()
    );
    assert_eq!(user_fields(&mut primary).await, fields, "no refusal added a field per user");

    // Once the memory has passed (its span drawn up to `SOLD_OUT_MEMORY_SPREAD` times the
    // setting), the script decides again and the freed number sells.
    let longest = MEMORY.mul_f64(shared::gate::SOLD_OUT_MEMORY_SPREAD);
    tokio::time::sleep(longest.saturating_sub(remembered_at.elapsed()) + Duration::from_millis(100)).await;
    assert_eq!(app.grab(&event, "eve").await.status, 202, "the freed number, after the memory");
    assert!(calls(&mut primary, "evalsha").await >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_replica_leaves_the_script_deciding() {
    logs_when_asked();
    let (pair, app) = with_reader().await;
    let mut primary = pair.direct(&pair.primary).await;
    let event = app.open_event(1).await;
    let ada = app.grab(&event, "ada").await;
    assert_eq!(ada.status, 202);
    app.deliver_all().await;
    // The replica falls behind: it may lack what the primary wrote since, so sold out is not
    // remembered, and every grab still runs the script, which knows the holder.
    pair.link.hold();
    assert_eq!(app.grab(&event, "cy").await.code(), "SOLD_OUT");
    reset(&mut primary).await;
    let again = app.grab(&event, "ada").await;
    assert_eq!((again.status, &again.body["order_id"]), (200, &ada.body["order_id"]));
    assert_eq!(app.grab(&event, "dee").await.code(), "SOLD_OUT");
    assert_eq!(calls(&mut primary, "evalsha").await, 2, "both grabs ran the script");
}

/// A provisioned grab environment connects its reader in its init: left to the first sold-out
/// refusal, every environment of a warm fleet would connect in the same second, each a handshake
/// on the replica (in cluster mode on every node), just as the sale ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_grab_environment_connects_its_reader_before_the_sell_out() {
    logs_when_asked();
    let (pair, app) = with_reader().await;
    let mut replica = pair.direct(&pair.replica).await;
    let connected = |info: String| -> u64 {
        info.lines().find_map(|l| l.strip_prefix("connected_clients:")).and_then(|n| n.trim().parse().ok()).unwrap()
    };
    let before = connected(redis::cmd("INFO").arg("clients").query_async(&mut replica).await.unwrap());
    let environment = local_runner::Functions::build(&app.settings, &app.queue_url).await.expect("functions");
    assert_eq!(
        connected(redis::cmd("INFO").arg("clients").query_async(&mut replica).await.unwrap()),
        before,
        "built, not yet warmed: nothing on the replica"
    );
    environment.grab.warm_up().await;
    assert_eq!(
        connected(redis::cmd("INFO").arg("clients").query_async(&mut replica).await.unwrap()),
        before + 1,
        "the warm-up connected the reader"
    );
}
