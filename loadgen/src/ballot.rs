//! The sales that draw, start to finish, as their users and their organiser go through them: the
//! release with a commitment, every user entering a ballot or joining a fair open's queue (some
//! twice at once), the draw when its time comes; a ballot's winners confirmed and mailed, a fair
//! open's users admitted wave by wave and grabbing; then the draw checked as an auditor would
//! (recomputed from what it publishes) and the outcome checked against it over HTTP.

use std::{
    collections::{HashMap, HashSet},
    time::{Duration, Instant, SystemTime},
};

use futures::StreamExt;
use serde_json::json;
use shared::domain::{
    EventId, UserId,
    draw::{self, ProofStep, Published},
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

/// One user's entry (or join), as it was answered.
struct Entered {
    user: usize,
    status: u16,
    outcome: String,
    latencies: Vec<Duration>,
    /// How long the user's work took, when the event asked for it.
    solved: Option<Duration>,
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
    by_user: HashMap<usize, Vec<u16>>,
    requests: usize,
    published: Published,
    /// Each minted user's index by their id.
    index: HashMap<String, usize>,
    started: Instant,
    drawn_at: SystemTime,
}

/// The release, every user's entry (one in [`TWICE_EVERY`] twice at once) and the draw at its time.
async fn enter_and_draw(
    api: &Api,
    users: &Users,
    plan: &Plan,
    mode: Mode,
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
    let published = api.published_draw(&users.tokens[0], &event).await;
    if let Some(path) = &plan.draw_out {
        std::fs::write(path, published.body.to_string())
            .map_err(|e| RunError::Setup(format!("{}: {e}", path.display())))?;
    }
    let published: Published = serde_json::from_value(published.body.clone())
        .map_err(|e| RunError::Setup(format!("the published draw: {e}: {}", published.body)))?;
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
        entrants: published.entrants.len(),
        winners: capacity,
        waiting: published.order.len() - capacity,
    });
    let index = users.subs.iter().enumerate().filter_map(|(i, s)| Some((s.clone()?, i))).collect();
    Ok(Drawn { event, by_user, requests: answers.len(), published, index, started, drawn_at })
}

/// The checks every sale that draws answers: one entry per user, the draw recomputed.
fn draw_checks(drawn: &Drawn, n: usize) -> Vec<Check> {
    let once_each = drawn
        .by_user
        .values()
        .all(|s| s.iter().filter(|&&x| x == 201).count() == 1 && s.iter().all(|x| [200, 201].contains(x)));
    let published = &drawn.published;
    let verified = published.verify();
    let ours: HashSet<&str> = drawn.index.keys().map(String::as_str).collect();
    let listed: HashSet<&str> = published.entrants.iter().map(String::as_str).collect();
    vec![
        Check::new(
            "one entry per user (a second at the same time told 200)",
            once_each && drawn.by_user.len() == n && published.entrants.len() == n,
            format!(
                "{} users, {} requests, {} entrants drawn",
                drawn.by_user.len(),
                drawn.requests,
                published.entrants.len()
            ),
        ),
        Check::new(
            "the published draw recomputes (ticket-draw/v1) over exactly our entrants",
            verified.is_ok() && (ours.is_empty() || ours == listed),
            match &verified {
                Ok(()) => format!("root {}", published.root),
                Err(fault) => fault.to_string(),
            },
        ),
    ]
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
pub async fn run_ballot(api: &Api, users: &Users, plan: &Plan) -> Result<Report, RunError> {
    let mut report = new_report(users, plan);
    let drawn = enter_and_draw(api, users, plan, Mode::Ballot, &mut report).await?;
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
    let confirmed: HashSet<&str> =
        rows.iter().filter(|r| r.status == "CONFIRMED").map(|r| r.user_id.as_str()).collect();
    let wanted: HashSet<&str> = winners.iter().map(String::as_str).collect();
    checks.push(Check::new(
        "the confirmed orders are exactly the draw's first capacity",
        confirmed == wanted,
        format!("{} confirmed, {} drawn to win", confirmed.len(), wanted.len()),
    ));
    let mailed = rows.iter().filter(|r| r.status == "CONFIRMED" && r.mail_status.as_deref() == Some("SENT")).count();
    checks.push(Check::new("every winner mailed", mailed == wanted.len(), format!("{mailed} of {}", wanted.len())));
    let stride = (losers.len() / SAMPLED).max(1);
    let (mut in_order, mut proven, mut sampled) = (0, 0, 0);
    for (k, user) in losers.iter().enumerate().step_by(stride) {
        let Some(&i) = index.get(user) else { continue };
        sampled += 1;
        let (place, _, _) = with_retries(drawn.started, || api.waitlist(&users.tokens[i], event)).await;
        if place.body["position"].as_u64().is_some_and(|p| p as usize <= k + 1) {
            // Positions only move up as the places before are promoted.
            in_order += 1;
        }
        let (entry, _, _) = with_retries(drawn.started, || api.entry(&users.tokens[i], event)).await;
        let proof: Vec<ProofStep> = serde_json::from_value(entry.body["proof"].clone()).unwrap_or_default();
        if entry.body["draw_position"].as_u64() == Some((capacity + k + 1) as u64)
            && draw::proves(user, &proof, &published.root)
        {
            proven += 1;
        }
    }
    checks.push(Check::new(
        "the rest wait in draw order, each with a proof of entry",
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
pub async fn run_fair_open(api: &Api, users: &Users, plan: &Plan) -> Result<Report, RunError> {
    let mut report = new_report(users, plan);
    let drawn = enter_and_draw(api, users, plan, Mode::FairOpen, &mut report).await?;
    let (event, published, index) = (&drawn.event, &drawn.published, &drawn.index);
    // Wave by wave, as the queue admits them: a wave's users grab once admitted, and the next
    // wave's start once this one has answered, as clients behind a waiting room do (a wave grabbing
    // slower than the admission's second would otherwise race the next, and the check below would
    // measure the client's speed, not the queue's order).
    let rate = plan.admission_rate.unwrap_or(plan.tickets).max(1) as usize;
    let in_order: Vec<(usize, usize)> =
        published.order.iter().enumerate().filter_map(|(k, u)| Some((k + 1, *index.get(u)?))).collect();
    let bar = progress(in_order.len() as u64, "admitted");
    let mut outcomes: Vec<Tried> = Vec::with_capacity(in_order.len());
    for wave in in_order.chunks(rate) {
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
    checks.extend(mailbox_check(plan, users, confirmed.len()).await?);
    report.passed = checks.iter().all(|c| c.pass);
    report.checks = checks;
    Ok(report)
}
