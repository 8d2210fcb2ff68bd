//! A Redis failover mid-sale, as ElastiCache does one: a primary and a replica (two redis-server
//! processes), the replica lagging, the primary killed, the replica promoted (`REPLICAOF NO ONE`)
//! and the primary endpoint moved to it. The replica lacks the primary's last acknowledged grabs;
//! the gate must see that its cache comes from another history, pause the sale, and rebuild it
//! exactly once the queue has drained (docs/DESIGN.md sections 6 and 10).
//!
//! Two loopback proxies stand in for the network: the primary endpoint (a name that moves to the
//! promoted replica; the move cuts the open connections) and the replication link (which can be
//! held, so the replica falls behind on purpose and the lost window is never empty by luck).

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use redis::AsyncCommands;
use shared::{domain::EventId, gate::keys, http::routes::Function};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::watch,
    task::JoinHandle,
};

use crate::{faults::*, helpers::*};

/// A TCP forwarder on loopback.
pub(crate) struct Proxy {
    port: u16,
    target: Arc<Mutex<u16>>,
    held: watch::Sender<bool>,
    conns: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: JoinHandle<()>,
}

impl Proxy {
    async fn start(target: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let target = Arc::new(Mutex::new(target));
        let (held, _) = watch::channel(false);
        let conns: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let accept = {
            let (target, held, conns) = (target.clone(), held.clone(), conns.clone());
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let to = *target.lock().unwrap();
                    let held = held.subscribe();
                    let conn = tokio::spawn(async move {
                        let Ok(server) = TcpStream::connect(("127.0.0.1", to)).await else { return };
                        let (cr, cw) = client.into_split();
                        let (sr, sw) = server.into_split();
                        tokio::select! {
                            _ = forward(cr, sw, held.clone()) => {}
                            _ = forward(sr, cw, held) => {}
                        }
                    });
                    conns.lock().unwrap().push(conn);
                }
            })
        };
        Self { port, target, held, conns, accept }
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Holds every byte in flight, both ways: the link stays open and carries nothing.
    pub(crate) fn hold(&self) {
        self.held.send_replace(true);
    }

    /// Carries what it held, and what comes, again.
    pub(crate) fn release(&self) {
        self.held.send_replace(false);
    }

    /// Cuts every open connection; what was held is gone.
    fn cut(&self) {
        for conn in self.conns.lock().unwrap().drain(..) {
            conn.abort();
        }
    }

    /// New connections lead to `target`, and the open ones are cut, as when the endpoint's name
    /// moves to another node.
    fn point_to(&self, target: u16) {
        *self.target.lock().unwrap() = target;
        self.cut();
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

async fn forward(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut held: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        // Held: the bytes wait here, as on a link that stopped carrying them.
        if held.wait_for(|held| !*held).await.is_err() || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// A primary, its replica behind a link that can be held, and the primary endpoint in front.
pub(crate) struct Pair {
    pub(crate) primary: PrivateRedis,
    pub(crate) replica: PrivateRedis,
    pub(crate) link: Proxy,
    pub(crate) endpoint: Proxy,
}

impl Pair {
    pub(crate) async fn start() -> Self {
        let primary = PrivateRedis::start().await;
        let link = Proxy::start(primary.port).await;
        let replica =
            PrivateRedis::start_with(&["--replicaof".into(), "127.0.0.1".into(), link.port.to_string()]).await;
        let endpoint = Proxy::start(primary.port).await;
        let pair = Self { primary, replica, link, endpoint };
        let r = pair.direct(&pair.replica).await;
        let synced = eventually(Duration::from_secs(20), || {
            let mut r = r.clone();
            async move {
                let info: String = redis::cmd("INFO").arg("replication").query_async(&mut r).await.unwrap_or_default();
                info.contains("master_link_status:up") && info.contains("master_sync_in_progress:0")
            }
        })
        .await;
        assert!(synced, "the replica did not sync");
        pair
    }

    /// A connection straight to one server (not through the endpoint).
    pub(crate) async fn direct(&self, server: &PrivateRedis) -> redis::aio::MultiplexedConnection {
        redis::Client::open(redis_info(&server.url())).unwrap().get_multiplexed_async_connection().await.unwrap()
    }

    /// Waits until the replica has everything the primary wrote so far.
    pub(crate) async fn caught_up(&self) {
        let mut p = self.direct(&self.primary).await;
        let written = offset(&mut p, "master_repl_offset").await;
        let r = self.direct(&self.replica).await;
        let caught_up = eventually(Duration::from_secs(20), || {
            let mut r = r.clone();
            async move { offset(&mut r, "slave_repl_offset").await >= written }
        })
        .await;
        assert!(caught_up, "the replica did not catch up");
    }

    /// The failover: the primary dies (SIGKILL), what the held link carried is gone, the replica
    /// is promoted and the endpoint moves to it.
    pub(crate) async fn fail_over(&mut self) {
        self.primary.kill();
        self.link.cut();
        let mut r = self.direct(&self.replica).await;
        let _: () = redis::cmd("REPLICAOF").arg("NO").arg("ONE").query_async(&mut r).await.unwrap();
        self.endpoint.point_to(self.replica.port);
    }
}

/// A replication offset from a server's `INFO replication`.
pub(crate) async fn offset(conn: &mut redis::aio::MultiplexedConnection, name: &str) -> i64 {
    let info: String = redis::cmd("INFO").arg("replication").query_async(conn).await.unwrap();
    info.lines()
        .find_map(|l| l.trim_end().strip_prefix(name).and_then(|v| v.strip_prefix(':')))
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1)
}

/// The users holding a ticket in one server's cache.
async fn holders(conn: &mut redis::aio::MultiplexedConnection, event: &EventId) -> HashSet<String> {
    let meta: HashMap<String, String> = conn.hgetall(keys::meta(event)).await.unwrap();
    meta.into_iter()
        .filter(|(field, value)| field.starts_with('=') && !value.starts_with('#'))
        .map(|(field, _)| field[1..].to_owned())
        .collect()
}

/// 100 tickets, 2,000 users. 30 grab while the replica keeps up; the link is held and 30 more
/// grab: the primary grants them, but no replica confirms their sent records, so none is sent and
/// each is told `503` (its retry too); the other 1,940 arrive at once and the primary is killed
/// under them. Every user told `202` must end with their ticket; nobody is oversold, no order is
/// `REJECTED`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn primary_killed_mid_sale_with_a_lagging_replica() {
    logs_when_asked();
    let mut pair = Pair::start().await;
    let app = app_on_redis(pair.endpoint.url()).await;
    let event = app.open_event(100).await;
    let users = users("fo");
    let f = app.functions.clone();
    let mut replies = Replies::default();
    answered(&f, &app, &event, &users[..30], &mut replies).await;
    pair.caught_up().await;

    pair.link.hold();
    let mut held = Replies::default();
    let unanswered = wave(&f, &app, &event, &users[30..60], &mut held).await;
    let retried = wave(&f, &app, &event, &unanswered, &mut held).await;
    assert_eq!(
        (unanswered.len(), retried.len()),
        (30, 30),
        "a grant no replica holds is not acknowledged: {}",
        held.seen()
    );
    replies.merge(held);

    // The consumer runs throughout, as the event source mapping does.
    let poller = app.poller();
    let (stop_tx, stop_rx) = watch::channel(false);
    let polling = tokio::spawn(poller.run(2, Default::default(), stop_rx));

    let rest = {
        let (f, app, event, users) = (f.clone(), app.clone(), event.clone(), users[60..].to_vec());
        tokio::spawn(async move {
            let mut replies = Replies::default();
            let pending = wave(&f, &app, &event, &users, &mut replies).await;
            (replies, pending)
        })
    };
    let on_primary = holders(&mut pair.direct(&pair.primary).await, &event).await;
    let killed = Instant::now();
    pair.fail_over().await;
    let on_replica = holders(&mut pair.direct(&pair.replica).await, &event).await;
    let lost_window = on_primary.difference(&on_replica).count();
    assert!(
        lost_window >= 30,
        "the replica lacks the grabs the primary acknowledged alone ({lost_window} of {} missing)",
        on_primary.len()
    );
    assert!(on_replica.is_subset(&on_primary));

    let (mut during, mut pending) = rest.await.unwrap();
    // The held ones ask again after the failover: their grants went with the old primary.
    pending.extend(retried);
    retry(&f, &app, &event, pending, &mut during).await;
    let resumed = killed.elapsed();
    let _ = stop_tx.send(true);
    polling.await.unwrap();
    drain(&app, &event).await;
    let recover = killed.elapsed();
    let saw = format!(
        "lost window: {lost_window} acknowledged grabs missing on the promoted replica; after the kill: {}, every user answered {:.1} s after it; overall: ",
        during.seen(),
        resumed.as_secs_f64()
    );
    replies.merge(during);
    let checked = check_invariants(&app, &event, &replies).await;
    println!("failover: lost window {lost_window}, resumed {resumed:?}, recovered {recover:?}");
    record(
        "Redis failover mid-sale: primary killed, replica lagging (link held), promoted and the endpoint moved",
        &(saw + &replies.seen()),
        &checked,
        recover,
    );
    assert_eq!(checked.rejected, 0, "a user told 202 ended REJECTED");
}

/// A send that fails is acknowledged only once a replica holds the outbox entry: with the replica
/// keeping up, `202`; with the link held, `503 BUSY` after the short `WAIT`, its retry too, and
/// once the replica has it, the retry is told the same order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_send_is_acknowledged_only_once_a_replica_holds_the_order() {
    let pair = Pair::start().await;
    let app = app_on_redis(pair.endpoint.url()).await;
    let event = app.open_event(10).await;
    let mut settings = app.settings.clone();
    settings.aws_endpoint = "http://127.0.0.1:1".into();
    let cut_off = local_runner::Functions::build(&settings, &app.queue_url).await.unwrap();

    let reply = call_with(&cut_off, Function::Grab, app.grab_event(&event, "u1")).await;
    assert_eq!(reply.status, 202, "{}", reply.body);
    let mut r = pair.direct(&pair.replica).await;
    let outbox: HashMap<String, String> = r.hgetall(keys::outbox(&event)).await.unwrap();
    assert!(outbox.contains_key(reply.body["order_id"].as_str().unwrap()), "the replica holds the entry");

    pair.link.hold();
    let held = call_with(&cut_off, Function::Grab, app.grab_event(&event, "u2")).await;
    assert_eq!((held.status, held.body["code"].as_str()), (503, Some("BUSY")), "{}", held.body);
    let outbox: HashMap<String, String> = r.hgetall(keys::outbox(&event)).await.unwrap();
    assert_eq!(outbox.len(), 1, "the replica never got u2's entry");
    // The retry's 200 would be as much a promise: not while nothing but the primary holds the order.
    let again = call_with(&cut_off, Function::Grab, app.grab_event(&event, "u2")).await;
    assert_eq!((again.status, again.body["code"].as_str()), (503, Some("BUSY")), "{}", again.body);

    pair.link.release();
    pair.caught_up().await;
    let retry = call_with(&cut_off, Function::Grab, app.grab_event(&event, "u2")).await;
    assert_eq!(retry.status, 200, "{}", retry.body);
    let primary_outbox = app.cache(&event).await.outbox;
    assert_eq!(primary_outbox.len(), 2);
    assert!(
        primary_outbox.contains_key(retry.body["order_id"].as_str().unwrap()),
        "the same order, still in the outbox"
    );
}

/// A replica whose link drops (a partition longer than its timeout, a reconnect that does not
/// complete) leaves its primary with no replica connected: the replica holds the sent records'
/// earlier orders and not the next, and may yet be the one promoted. The primary then reads like
/// a cache with no replica at all, which has none to wait for; it is not one: no order kept while
/// the replica is gone is sent or told `202`. Once it is back and has caught up, the retry is told
/// of the same order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_primary_whose_replica_is_gone_is_not_taken_for_one_without_replicas() {
    let pair = Pair::start().await;
    let app = app_on_redis(pair.endpoint.url()).await;
    let event = app.open_event(10).await;
    assert_eq!(app.grab(&event, "u1").await.status, 202);

    // The link drops, and the replica's reconnects carry nothing.
    pair.link.hold();
    pair.link.cut();
    let p = pair.direct(&pair.primary).await;
    assert!(replicas_connected(&p, 0, Duration::from_secs(20)).await, "the primary still counts its replica");
    let told = app.grab(&event, "u2").await;
    assert_eq!((told.status, told.body["code"].as_str()), (503, Some("BUSY")), "{}", told.body);
    let r = pair.direct(&pair.replica).await;
    let mut r2 = r.clone();
    let sent: HashMap<String, String> = r2.hgetall(keys::outbox(&event)).await.unwrap();
    assert_eq!(sent.len(), 1, "the replica has u1's order only");

    pair.link.release();
    assert!(replicas_connected(&p, 1, Duration::from_secs(30)).await, "the replica did not come back");
    pair.caught_up().await;
    let retry = app.grab(&event, "u2").await;
    assert_eq!(retry.status, 200, "{}", retry.body);
    assert_eq!(retry.body["order_id"], told_order(&app, &event, "u2").await, "the same order");
}

/// Whether `primary` counts `n` replicas connected within `limit`.
async fn replicas_connected(primary: &redis::aio::MultiplexedConnection, n: u32, limit: Duration) -> bool {
    eventually(limit, || {
        let mut p = primary.clone();
        async move {
            let info: String = redis::cmd("INFO").arg("replication").query_async(&mut p).await.unwrap_or_default();
            info.contains(&format!("connected_slaves:{n}"))
        }
    })
    .await
}

/// The order the cache holds for `user` (their field in `meta`).
async fn told_order(app: &TestApp, event: &EventId, user: &str) -> serde_json::Value {
    let meta: HashMap<String, String> = app.redis.clone().hgetall(keys::meta(event)).await.unwrap();
    let field = meta.get(&format!("={user}")).expect("the user's field");
    serde_json::json!(keys::parse_holding(field).expect("a holding").order)
}
