//! The sales that draw, start to finish, as their users and their organiser go through them: the
//! release with a commitment, every user entering a ballot or joining a fair open's queue (some
//! twice at once), the draw when its time comes; a ballot's winners confirmed and mailed, a fair
//! open's users admitted wave by wave and grabbing; then the draw checked as an auditor would
//! (every page fetched and joined, recomputed from what it publishes, `ticket-draw/v2`: leaves,
//! no user id) and the outcome checked against it over HTTP. Each user is known in the draw by the
//! leaf their entry's reply gave them; their receipt is checked against the event's published
//! receipt keys, and their entry key against their leaf (docs/FAIRNESS.md sections 2a and 6a).

use std::{
    collections::{HashMap, HashSet},
    path::Path,
    time::{Duration, Instant, SystemTime},
};

use futures::StreamExt;
use serde_json::json;
use shared::domain::{
    EventId, UserId,
    draw::{self, Algorithm, EntryKey, ProofStep, Published},
    entry_receipt::{self, ReceiptKeyRing},
    hex, proof_of_work,
};
use time::{OffsetDateTime, format_description::well_known::Rfc3339};

use crate::{
    api::Api,
    report::{BallotPhase, Check, Latency, Report},
    run::{Plan, RunError, Users, mailbox_check, progress, wait_for_confirmation, with_retries},
};

/// Users entering twice at once: one in this many.
const TWICE_EVERY: usize = 10;
/// Losers whose place and entry are read back (each a request or two).
const SAMPLED: usize = 50;
/// More pages than this is a draw that does not end (`next` going round): 10,000 pages of
/// [`draw::PAGE_PLACES`] are 100 million entrants.
const MAX_PAGES: usize = 10_000;

/// What an entry's reply (`201` or `200`) gave its user: the entry's key, its leaf in the draw and
/// its signed receipt (empty when the reply had none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Mine {
    entry_key: String,
    leaf: String,
    receipt: String,
}

impl Mine {
    fn of(body: &serde_json::Value) -> Self {
        let text = |k: &str| body[k].as_str().unwrap_or_default().to_owned();
        Self { entry_key: text("entry_key"), leaf: text("leaf"), receipt: text("receipt") }
    }
}

/// One user's entry (or join), as it was answered.
struct Entered {
    user: usize,
    status: u16,
    outcome: String,
    latencies: Vec<Duration>,
    /// How long the user's work took, when the event asked for it.
    solved: Option<Duration>,
    /// A 201's or 200's entry: its key, leaf and receipt.
    mine: Option<Mine>,
}

/// One fair-open user's try: their place, whether the queue told them that place, the grab's answer.
struct Tried {
    position: usize,
    user: usize,
    at_place: bool,
    status: u16,
    outcome: String,
}

/// Which sale that draws.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Ballot,
    FairOpen,
}

/// What the release, the entries and the draw left: the event, each user's answers, the draw.
struct Drawn {
    event: String,
    event_id: EventId,
    by_user: HashMap<usize, Vec<u16>>,
    requests: usize,
    /// The published draw: every page, joined.
    published: Published,
    /// How many pages it came in, and the pages' bodies that name a user id (a `sub`) or list
    /// entrants.
    pages: usize,
    revealing: Vec<String>,
    /// Each user's entry, as their first 201 or their 200 gave it, and whether all their 201s
    /// and 200s gave the same.
    mine: HashMap<usize, Mine>,
    agree: bool,
    /// Each user's index by their leaf.
    index: HashMap<String, usize>,
    /// `GET /events/{id}/receipt-key`, as it answered.
    keys: crate::api::Answer,
    started: Instant,
    drawn_at: SystemTime,
}

/// The release, every user's entry (one in [`TWICE_EVERY`] twice at once) and the draw at its time.
async fn enter_and_draw(
    api: &Api,
    users: &Users,
    plan: &Plan,
    mode: Mode,
    receipt_out: Option<&Path>,
    report: &mut Report,
) -> Result<Drawn, RunError> {
    let n = users.tokens.len();
    let event = report.event_id.clone();
    let draw_at = OffsetDateTime::now_utc() + plan.lead;
    // The organiser's secret: 32 bytes from the operating system, committed to at release.
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|e| RunError::Setup(format!("no randomness: {e}")))?;
    let mut release = json!({
        "id": event,
        "title": format!("loadgen {}", plan.scenario),
        "capacity": plan.tickets,
        "sale_mode": "ballot",
        "draw_commitment": draw::commitment(&secret),
        "sale_start": draw_at.format(&Rfc3339).unwrap_or_default(),
        "sale_end": (draw_at + time::Duration::hours(1)).format(&Rfc3339).unwrap_or_default(),
    });
    if let Some(bits) = plan.proof_of_work_bits {
        release["proof_of_work_bits"] = json!(bits);
    }
    if mode == Mode::FairOpen {
        release["sale_mode"] = json!("fair_open");
        release["queue_opens"] = json!(OffsetDateTime::now_utc().format(&Rfc3339).unwrap_or_default());
        release["admission_rate"] = json!(plan.admission_rate.unwrap_or(plan.tickets));
    }
    let released = api.release(&users.admin, &release).await;
    if released.status != 201 {
        return Err(RunError::Setup(format!("release answered {}: {}", released.status, released.body)));
    }

    let started = Instant::now();
    let bar = progress(n as u64, if mode == Mode::Ballot { "entries" } else { "queue" });
    let attempts: Vec<(usize, bool)> =
        (0..n).flat_map(|u| std::iter::once((u, false)).chain((u % TWICE_EVERY == 0).then_some((u, true)))).collect();
    let event_id = EventId::parse(&event).map_err(|e| RunError::Setup(e.to_string()))?;
    let answers: Vec<Entered> = futures::stream::iter(attempts)
        .map(|(user, second)| {
            let (api, event, bar, token) = (api.clone(), event.clone(), bar.clone(), &users.tokens[user]);
            let sub = users.subs[user].clone();
            let event_id = event_id.clone();
            async move {
                // The work is the user's own (a client's core; off the async threads).
                let solving = Instant::now();
                let work = match (plan.proof_of_work_bits, sub) {
                    (Some(bits), Some(sub)) => {
                        let id = UserId::parse(&sub).ok();
                        tokio::task::spawn_blocking(move || id.map(|u| proof_of_work::solve(&event_id, &u, bits)))
                            .await
                            .ok()
                            .flatten()
                    }
                    _ => None,
                };
                let solved = work.as_ref().map(|_| solving.elapsed());
                let ask = || async {
                    match mode {
                        Mode::Ballot => api.enter(token, &event, work.as_deref()).await,
                        Mode::FairOpen => api.join_queue(token, &event, work.as_deref()).await,
                    }
                };
                let (last, samples, _) = with_retries(started, ask).await;
                if !second {
                    bar.inc(1);
                }
                Entered {
                    user,
                    status: last.status,
                    outcome: last.outcome(),
                    latencies: samples.iter().map(|s| s.latency).collect(),
                    solved,
                    mine: [200, 201].contains(&last.status).then(|| Mine::of(&last.body)),
                }
            }
        })
        .buffer_unordered(plan.concurrency)
        .collect()
        .await;
    bar.finish_and_clear();
    let entry_seconds = started.elapsed().as_secs_f64();
    let mut by_user: HashMap<usize, Vec<u16>> = HashMap::new();
    let mut outcomes = std::collections::BTreeMap::new();
    for a in &answers {
        by_user.entry(a.user).or_default().push(a.status);
        *outcomes.entry(a.outcome.clone()).or_insert(0usize) += 1;
    }
    // Each user's entry: the first 201's, or a 200's when that came first (both name the same
    // entry: checked).
    let mut mine: HashMap<usize, Mine> = HashMap::new();
    let mut agree = true;
    let mut given: Vec<&Entered> = answers.iter().filter(|a| a.mine.is_some()).collect();
    given.sort_by_key(|a| (a.user, a.status != 201));
    for a in given {
        let Some(entry) = &a.mine else { continue };
        match mine.get(&a.user) {
            Some(first) => agree &= first == entry,
            None => {
                mine.insert(a.user, entry.clone());
            }
        }
    }
    let latencies: Vec<Duration> = answers.iter().flat_map(|a| a.latencies.iter().copied()).collect();

    let left = draw_at - OffsetDateTime::now_utc();
    if left.is_positive() {
        tokio::time::sleep(left.unsigned_abs()).await;
    }
    let drawing = Instant::now();
    let drawn_at = SystemTime::now();
    let revealed = hex::encode(&secret);
    let (drawn, _, _) = with_retries(drawing, || api.draw(&users.admin, &event, &revealed)).await;
    let draw_ms = drawing.elapsed().as_secs_f64() * 1000.0;
    if drawn.status != 200 {
        return Err(RunError::Setup(format!("the draw answered {}: {}", drawn.status, drawn.body)));
    }
    // Every page of the published draw, following `next`, joined into the whole.
    let subs: Vec<&str> = users.subs.iter().flatten().map(String::as_str).collect();
    let (mut pages, mut revealing) = (Vec::new(), Vec::new());
    let mut from = 0u64;
    loop {
        let (page, _, _) = with_retries(drawing, || api.published_draw(&users.tokens[0], &event, from)).await;
        if page.status != 200 {
            return Err(RunError::Setup(format!(
                "the published draw from {from} answered {}: {}",
                page.status, page.body
            )));
        }
        let text = page.body.to_string();
        if let Some(sub) = subs.iter().find(|s| text.contains(*s)) {
            revealing.push(format!("the page from {from} names user {sub}"));
        }
        if page.body["entrants"].as_array().is_some_and(|e| !e.is_empty()) {
            revealing.push(format!("the page from {from} lists entrants"));
        }
        let page: Published = serde_json::from_value(page.body.clone())
            .map_err(|e| RunError::Setup(format!("the published draw from {from}: {e}: {}", page.body)))?;
        let next = page.next;
        pages.push(page);
        match next {
            None => break,
            Some(next) if next > from && pages.len() < MAX_PAGES => from = next,
            Some(next) => return Err(RunError::Setup(format!("the draw's page from {from} names {next} next"))),
        }
    }
    let page_count = pages.len();
    let published = Published::join(pages).map_err(|e| RunError::Setup(format!("the published draw: {e}")))?;
    if let Some(path) = &plan.draw_out {
        std::fs::write(path, serde_json::to_string(&published).unwrap_or_default())
            .map_err(|e| RunError::Setup(format!("{}: {e}", path.display())))?;
    }
    let (keys, _, _) = with_retries(drawing, || api.receipt_key(&users.tokens[0], &event)).await;
    if let Some(path) = receipt_out {
        let first = mine.get(&0).ok_or_else(|| RunError::Setup("the first user has no entry to show".into()))?;
        let shown = json!({ "receipt": first.receipt, "entry_key": first.entry_key, "keys": keys.body });
        std::fs::write(path, serde_json::to_string_pretty(&shown).unwrap_or_default())
            .map_err(|e| RunError::Setup(format!("{}: {e}", path.display())))?;
    }
    let capacity = (plan.tickets as usize).min(published.order.len());
    report.ballot = Some(BallotPhase {
        sale_mode: if mode == Mode::Ballot { "ballot" } else { "fair_open" },
        entries: answers.len(),
        seconds: entry_seconds,
        latency: Latency::of(&latencies),
        outcomes,
        draw_ms,
        work_bits: plan.proof_of_work_bits,
        work_solve: Latency::of(&answers.iter().filter_map(|a| a.solved).collect::<Vec<_>>()),
        entrants: published.order.len(),
        winners: capacity,
        waiting: published.order.len() - capacity,
    });
    let index = mine.iter().filter(|(_, m)| !m.leaf.is_empty()).map(|(&u, m)| (m.leaf.clone(), u)).collect();
    Ok(Drawn {
        event,
        event_id,
        by_user,
        requests: answers.len(),
        published,
        pages: page_count,
        revealing,
        mine,
        agree,
        index,
        keys,
        started,
        drawn_at,
    })
}

/// The checks every sale that draws answers: one entry per user, the draw (every page joined)
/// recomputed over exactly our users' leaves and naming none of them, and each user's receipt and
/// entry key checked against their leaf.
fn draw_checks(drawn: &Drawn, n: usize) -> Vec<Check> {
    let once_each = drawn
        .by_user
        .values()
        .all(|s| s.iter().filter(|&&x| x == 201).count() == 1 && s.iter().all(|x| [200, 201].contains(x)));
    let published = &drawn.published;
    let entrants = published.order.len();
    let verified = published.verify().map_err(|f| f.to_string()).and_then(|()| {
        if published.algorithm() != Ok(Algorithm::V2) {
            Err(format!("the draw is {}, not ticket-draw/v2", published.algorithm))
        } else if published.event_id.as_deref() != Some(drawn.event.as_str()) {
            Err(format!("the draw names event {:?}, not {}", published.event_id, drawn.event))
        } else {
            Ok(())
        }
    });
    let ours: HashSet<&str> = drawn.index.keys().map(String::as_str).collect();
    let listed: HashSet<&str> = published.order.iter().map(String::as_str).collect();
    let (receipts, keys) = receipt_checks(drawn);
    // The draw's signed head: the keys' reply after the draw signs the terms every page carries.
    let head = ReceiptKeyRing::from_published(&drawn.keys.body).map_err(|e| e.to_string()).and_then(|ring| {
        let text = drawn.keys.body["draw_head"].as_str().ok_or("no draw_head after the draw")?;
        let head = ring.verify_head(text).map_err(|e| e.to_string())?;
        if head.matches(published) { Ok(head) } else { Err(format!("the head {head:?} is not the published draw's")) }
    });
    vec![
        Check::new(
            "the draw's head is signed with the receipt key and names the published draw",
            head.is_ok(),
            match &head {
                Ok(h) => format!("root {}, {} entrants, drawn at {}", h.root, h.entrant_count, h.drawn_at),
                Err(why) => why.clone(),
            },
        ),
        Check::new(
            "one entry per user (a second at the same time told 200, with the same entry)",
            once_each && drawn.agree && drawn.by_user.len() == n && entrants == n,
            format!(
                "{} users, {} requests, {} entrants drawn{}",
                drawn.by_user.len(),
                drawn.requests,
                entrants,
                if drawn.agree { "" } else { "; a user's replies named two entries" }
            ),
        ),
        Check::new(
            "the published draw (every page joined) recomputes (ticket-draw/v2, naming its event) over exactly our users' leaves",
            verified.is_ok() && ours.len() == n && ours == listed,
            match &verified {
                Ok(()) => format!(
                    "{} page(s), root {}; {} of our {} leaves drawn, {} leaves not ours",
                    drawn.pages,
                    published.root,
                    ours.intersection(&listed).count(),
                    ours.len(),
                    listed.difference(&ours).count()
                ),
                Err(fault) => fault.clone(),
            },
        ),
        Check::new(
            "GET /draw reveals no user id",
            drawn.revealing.is_empty(),
            match drawn.revealing.first() {
                None => format!("{} page(s): no user id, no entrants list", drawn.pages),
                Some(first) => format!("{} finding(s), the first: {first}", drawn.revealing.len()),
            },
        ),
        receipts,
        keys,
    ]
}

/// Every user's receipt against the event's published receipt keys (naming the event and their
/// leaf, accepted before the entries closed, not late), and their entry key against their leaf.
fn receipt_checks(drawn: &Drawn) -> (Check, Check) {
    let keys = &drawn.keys;
    let ring = if keys.status != 200 {
        Err(format!("GET /receipt-key answered {}: {}", keys.status, keys.body))
    } else if keys.body["event_id"].as_str() != Some(drawn.event.as_str())
        || keys.body["algorithm"].as_str() != Some(entry_receipt::ALGORITHM)
    {
        Err(format!("GET /receipt-key names another event or algorithm: {}", keys.body))
    } else {
        ReceiptKeyRing::from_published(&keys.body).map_err(|e| format!("GET /receipt-key: {e}"))
    };
    let time = |t: &str| OffsetDateTime::parse(t, &Rfc3339).ok();
    let close = drawn.published.entries_close.as_deref().and_then(time);
    let (mut signed, mut hashed, mut first_fault) = (0, 0, None::<String>);
    for (user, mine) in &drawn.mine {
        let checked = match &ring {
            Ok(ring) => ring.verify(&mine.receipt).map_err(|e| e.to_string()).and_then(|r| {
                if r.event != drawn.event_id || r.leaf != mine.leaf {
                    Err(format!("it names {} in {}, not the reply's leaf {}", r.leaf, r.event, mine.leaf))
                } else if r.late.is_some() {
                    Err(format!("it is a late place's (rank {:?})", r.late))
                } else if close.is_some() && time(&r.entered_at).is_none_or(|t| Some(t) >= close) {
                    Err(format!("it was signed at {}, not before the entries closed", r.entered_at))
                } else {
                    Ok(())
                }
            }),
            Err(why) => Err(why.clone()),
        };
        match checked {
            Ok(()) => signed += 1,
            Err(why) => {
                first_fault.get_or_insert(format!("user {user}'s receipt: {why}"));
            }
        }
        if EntryKey::from_hex(&mine.entry_key).is_some_and(|k| k.leaf(&drawn.event_id) == mine.leaf) {
            hashed += 1;
        }
    }
    let n = drawn.by_user.len();
    (
        Check::new(
            "every entry's receipt checks against GET /receipt-key, naming the event and its leaf",
            signed == n && drawn.mine.len() == n,
            match first_fault {
                Some(why) if signed < n => format!("{signed} of {n}; {why}"),
                _ => format!("{signed} of {n} receipts check"),
            },
        ),
        Check::new(
            "every entry key hashes to its leaf: SHA-256(0x00 || event || 0x00 || key)",
            hashed == n && drawn.mine.len() == n,
            format!("{hashed} of {n}"),
        ),
    )
}

fn new_report(users: &Users, plan: &Plan) -> Report {
    let now = OffsetDateTime::now_utc();
    Report {
        scenario: plan.scenario.clone(),
        base_url: String::new(),
        event_id: format!("lg-{}-{}", plan.scenario, uuid::Uuid::now_v7().simple()),
        users: users.tokens.len(),
        tickets: plan.tickets,
        concurrency: plan.concurrency,
        started_at: now.format(&Rfc3339).unwrap_or_default(),
        ..Report::default()
    }
}

/// A ballot: the first `tickets` of the draw confirmed and mailed, the rest waiting in its order.
///
/// `receipt_out`: where to write the first user's receipt, entry key and the event's receipt keys
/// (what `ticketgrab-verify receipt` reads).
pub async fn run_ballot(api: &Api, users: &Users, plan: &Plan, receipt_out: Option<&Path>) -> Result<Report, RunError> {
    let mut report = new_report(users, plan);
    let drawn = enter_and_draw(api, users, plan, Mode::Ballot, receipt_out, &mut report).await?;
    let (event, published, index) = (&drawn.event, &drawn.published, &drawn.index);
    let capacity = (plan.tickets as usize).min(published.order.len());
    let (winners, losers) = published.order.split_at(capacity);

    // Every winner confirmed and mailed, through the ordinary order path.
    let mut orders = HashMap::new();
    for user in winners {
        if let Some(&i) = index.get(user) {
            let (answer, _, _) = with_retries(drawn.started, || api.order(&users.tokens[i], event)).await;
            if let Some(order) = answer.body["order_id"].as_str() {
                orders.insert(order.to_owned(), i);
            }
        }
    }
    let (rows, confirmation) = wait_for_confirmation(api, users, plan, event, &orders, drawn.drawn_at).await?;
    report.confirmation = confirmation;

    let mut checks = draw_checks(&drawn, users.tokens.len());
    // Each confirmed order's user: by its user id where this run minted the users, else by the
    // order id a winner was given.
    let by_sub: HashMap<&str, usize> =
        users.subs.iter().enumerate().filter_map(|(i, s)| Some((s.as_deref()?, i))).collect();
    let (mut confirmed, mut strangers) = (HashSet::new(), 0);
    for row in rows.iter().filter(|r| r.status == "CONFIRMED") {
        match by_sub.get(row.user_id.as_str()).or(orders.get(&row.order_id)) {
            Some(&i) => {
                confirmed.insert(i);
            }
            None => strangers += 1,
        }
    }
    let wanted: HashSet<usize> = winners.iter().filter_map(|leaf| index.get(leaf).copied()).collect();
    checks.push(Check::new(
        "the confirmed orders' users are exactly those whose leaves hold the draw's first capacity",
        confirmed == wanted && wanted.len() == winners.len() && strangers == 0,
        format!(
            "{} confirmed, {} drawn to win ({} of them ours), {strangers} confirmed not ours",
            confirmed.len(),
            winners.len(),
            wanted.len()
        ),
    ));
    let mailed = rows.iter().filter(|r| r.status == "CONFIRMED" && r.mail_status.as_deref() == Some("SENT")).count();
    checks.push(Check::new("every winner mailed", mailed == wanted.len(), format!("{mailed} of {}", wanted.len())));
    let stride = (losers.len() / SAMPLED).max(1);
    let waitlist_size = plan.tickets as usize;
    let (mut in_order, mut proven, mut sampled) = (0, 0, 0);
    for (k, leaf) in losers.iter().enumerate().step_by(stride) {
        let Some(&i) = index.get(leaf) else { continue };
        sampled += 1;
        let (place, _, _) = with_retries(drawn.started, || api.waitlist(&users.tokens[i], event)).await;
        // The waitlist holds as many as its size (the release's default: the capacity); the rest
        // hold no place and see theirs in the draw alone.
        let holds_place = if k < waitlist_size {
            // Positions only move up as the places before are promoted.
            place.body["position"].as_u64().is_some_and(|p| p as usize <= k + 1)
        } else {
            place.status == 404 && place.body["code"] == "NOT_WAITING"
        };
        if holds_place {
            in_order += 1;
        }
        let (entry, _, _) = with_retries(drawn.started, || api.entry(&users.tokens[i], event)).await;
        if proves_place(&entry.body, leaf, capacity + k + 1, &published.root) {
            proven += 1;
        }
    }
    checks.push(Check::new(
        "the next waitlist_size wait in draw order, the rest hold no place, each with a proof of entry from their leaf",
        in_order == sampled && proven == sampled,
        format!("{sampled} sampled: {in_order} at their draw place, {proven} proofs to the root"),
    ));
    checks.extend(mailbox_check(plan, users, confirmed.len()).await?);
    report.passed = checks.iter().all(|c| c.pass);
    report.checks = checks;
    Ok(report)
}

/// A fair open: every user, in the draw's order, waits for their wave, asks verify-hash with
/// their admission and grabs; the winners must be the first `tickets` of the order.
///
/// `receipt_out`: as [`run_ballot`]'s.
pub async fn run_fair_open(
    api: &Api,
    users: &Users,
    plan: &Plan,
    receipt_out: Option<&Path>,
) -> Result<Report, RunError> {
    let mut report = new_report(users, plan);
    let drawn = enter_and_draw(api, users, plan, Mode::FairOpen, receipt_out, &mut report).await?;
    let (event, published, index) = (&drawn.event, &drawn.published, &drawn.index);
    // Wave by wave, as the queue admits them: a wave's users grab once admitted, and the next
    // wave's start once this one has answered, as clients behind a waiting room do (a wave grabbing
    // slower than the admission's second would otherwise race the next, and the check below would
    // measure the client's speed, not the queue's order).
    let rate = plan.admission_rate.unwrap_or(plan.tickets).max(1) as usize;
    let queued: Vec<(usize, usize)> =
        published.order.iter().enumerate().filter_map(|(k, u)| Some((k + 1, *index.get(u)?))).collect();
    let bar = progress(queued.len() as u64, "admitted");
    let mut outcomes: Vec<Tried> = Vec::with_capacity(queued.len());
    for wave in queued.chunks(rate) {
        let answered: Vec<Tried> = futures::stream::iter(wave.iter().copied())
            .map(|(position, user)| {
                let (api, event, bar, token) = (api.clone(), event.clone(), bar.clone(), &users.tokens[user]);
                async move {
                    let mut at_place = true;
                    let admission = loop {
                        let place = api.queue_place(token, &event).await;
                        at_place &= place.body["position"].as_u64().is_none_or(|p| p as usize == position);
                        if let Some(admission) = place.body["admission"].as_str() {
                            break admission.to_owned();
                        }
                        let wait = place.body["admitted_at"]
                            .as_str()
                            .and_then(|t| OffsetDateTime::parse(t, &Rfc3339).ok())
                            .map(|t| (t - OffsetDateTime::now_utc()).unsigned_abs())
                            .unwrap_or(Duration::from_millis(200));
                        tokio::time::sleep(wait.clamp(Duration::from_millis(20), Duration::from_secs(1))).await;
                    };
                    let (hash, _, _) =
                        with_retries(drawn.started, || api.verify_hash_admitted(token, &event, &admission)).await;
                    let hash = hash.body["hash"].as_str().unwrap_or_default().to_owned();
                    let (grabbed, _, _) = with_retries(drawn.started, || api.grab(token, &event, &hash)).await;
                    bar.inc(1);
                    Tried { position, user, at_place, status: grabbed.status, outcome: grabbed.outcome() }
                }
            })
            .buffer_unordered(plan.concurrency)
            .collect()
            .await;
        outcomes.extend(answered);
    }
    bar.finish_and_clear();
    // A winner's last answer is 202, or 200 when a retry (after a 503) found the same order.
    let won_it = |status: u16| status == 202 || status == 200;
    let mut orders = HashMap::new();
    for tried in &outcomes {
        if won_it(tried.status) {
            let answer = api.order(&users.tokens[tried.user], event).await;
            if let Some(order) = answer.body["order_id"].as_str() {
                orders.insert(order.to_owned(), tried.user);
            }
        }
    }
    let (rows, confirmation) = wait_for_confirmation(api, users, plan, event, &orders, drawn.drawn_at).await?;
    report.confirmation = confirmation;

    let mut checks = draw_checks(&drawn, users.tokens.len());
    let placed = outcomes.iter().filter(|o| o.at_place).count();
    checks.push(Check::new(
        "each user queued at their place in the draw's order",
        placed == outcomes.len(),
        format!("{placed} of {} at their place", outcomes.len()),
    ));
    // The queue's order decides: every wave before the one that sold out won whole, nobody after
    // it won, and the winners are exactly the tickets (within the selling wave, the gate decides
    // by arrival, as in any sale).
    let capacity = (plan.tickets as usize).min(published.order.len());
    let wave_of = |position: usize| (position - 1) / rate;
    let won: Vec<usize> = outcomes.iter().filter(|o| won_it(o.status)).map(|o| o.position).collect();
    let refused: Vec<usize> = outcomes.iter().filter(|o| o.outcome == "409 SOLD_OUT").map(|o| o.position).collect();
    let selling = refused.iter().map(|&p| wave_of(p)).min().unwrap_or(usize::MAX);
    let in_order = won.iter().all(|&p| wave_of(p) <= selling)
        && refused.iter().all(|&p| wave_of(p) >= selling)
        && won.len() + refused.len() == outcomes.len();
    checks.push(Check::new(
        "the winners are the first admitted, wave by wave in the draw's order; everyone after told SOLD_OUT",
        in_order && won.len() == capacity,
        format!(
            "{} won, {} SOLD_OUT; sold out in wave {} of {rate} users",
            won.len(),
            refused.len(),
            selling.saturating_add(1)
        ),
    ));
    let confirmed: Vec<_> = rows.iter().filter(|r| r.status == "CONFIRMED").collect();
    let mailed = confirmed.iter().filter(|r| r.mail_status.as_deref() == Some("SENT")).count();
    checks.push(Check::new(
        "every winner confirmed and mailed",
        confirmed.len() == won.len() && mailed == won.len(),
        format!("{} confirmed, {mailed} mailed of {}", confirmed.len(), won.len()),
    ));
    // A few users' own entries after the draw: their place, and the path from their leaf to the
    // published root.
    let stride = (queued.len() / SAMPLED).max(1);
    let (mut proven, mut sampled) = (0, 0);
    for &(position, user) in queued.iter().step_by(stride) {
        sampled += 1;
        let (entry, _, _) = with_retries(drawn.started, || api.entry(&users.tokens[user], event)).await;
        if proves_place(&entry.body, &published.order[position - 1], position, &published.root) {
            proven += 1;
        }
    }
    checks.push(Check::new(
        "each sampled user's entry gives their draw place and a proof from their leaf to the root",
        proven == sampled && sampled > 0,
        format!("{sampled} sampled: {proven} at their place with a proof to the root"),
    ));
    checks.extend(mailbox_check(plan, users, confirmed.len()).await?);
    report.passed = checks.iter().all(|c| c.pass);
    report.checks = checks;
    Ok(report)
}

/// Whether `GET /events/{id}/entry` (`entry`) gives `leaf`'s draw place `position` (from 1), the
/// published root, and a proof that leads from the leaf to it (`ticket-draw/v2`).
fn proves_place(entry: &serde_json::Value, leaf: &str, position: usize, root: &str) -> bool {
    let proof: Option<Vec<ProofStep>> = serde_json::from_value(entry["proof"].clone()).ok();
    entry["draw_position"].as_u64() == Some(position as u64)
        && entry["leaf"].as_str() == Some(leaf)
        && entry["root"].as_str() == Some(root)
        && proof.is_some_and(|p| draw::proves(Algorithm::V2, leaf, &p, root))
}
