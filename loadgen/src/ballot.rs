//! A ballot, start to finish, as its users and its organiser go through it: the release with a
//! commitment, every user entering (some twice at once), the draw when its time comes, the wait
//! for every winner to be confirmed and mailed; then the draw checked as an auditor would
//! (recomputed from what it publishes) and the outcome checked against it over HTTP.

use std::{
    collections::{HashMap, HashSet},
    time::{Duration, Instant, SystemTime},
};

use futures::StreamExt;
use serde_json::json;
use shared::domain::{
    draw::{self, ProofStep, Published},
    hex,
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

pub async fn run_ballot(api: &Api, users: &Users, plan: &Plan) -> Result<Report, RunError> {
    let n = users.tokens.len();
    let event = format!("lg-{}-{}", plan.scenario, uuid::Uuid::now_v7().simple());
    let now = OffsetDateTime::now_utc();
    let draw_at = now + plan.lead;
    // The organiser's secret: 32 bytes from the operating system, committed to at release.
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|e| RunError::Setup(format!("no randomness: {e}")))?;
    let mut report = Report {
        scenario: plan.scenario.clone(),
        base_url: String::new(),
        event_id: event.clone(),
        users: n,
        tickets: plan.tickets,
        concurrency: plan.concurrency,
        started_at: now.format(&Rfc3339).unwrap_or_default(),
        ..Report::default()
    };
    let release = json!({
        "id": event,
        "title": format!("loadgen {}", plan.scenario),
        "capacity": plan.tickets,
        "sale_mode": "ballot",
        "draw_commitment": draw::commitment(&secret),
        "sale_start": draw_at.format(&Rfc3339).unwrap_or_default(),
        "sale_end": (draw_at + time::Duration::hours(1)).format(&Rfc3339).unwrap_or_default(),
    });
    let released = api.release(&users.admin, &release).await;
    if released.status != 201 {
        return Err(RunError::Setup(format!("release answered {}: {}", released.status, released.body)));
    }

    // 1. every user enters; one in TWICE_EVERY sends a second entry at the same time
    let started = Instant::now();
    let bar = progress(n as u64, "entries");
    let attempts: Vec<(usize, bool)> =
        (0..n).flat_map(|u| std::iter::once((u, false)).chain((u % TWICE_EVERY == 0).then_some((u, true)))).collect();
    let answers: Vec<(usize, bool, u16, String, Vec<Duration>)> = futures::stream::iter(attempts)
        .map(|(user, second)| {
            let (api, event, bar, token) = (api.clone(), event.clone(), bar.clone(), &users.tokens[user]);
            async move {
                let (last, samples, _) = with_retries(started, || api.enter(token, &event)).await;
                if !second {
                    bar.inc(1);
                }
                (user, second, last.status, last.outcome(), samples.iter().map(|s| s.latency).collect())
            }
        })
        .buffer_unordered(plan.concurrency)
        .collect()
        .await;
    bar.finish_and_clear();
    let entry_seconds = started.elapsed().as_secs_f64();
    let mut by_user: HashMap<usize, Vec<u16>> = HashMap::new();
    for (user, _, status, _, _) in &answers {
        by_user.entry(*user).or_default().push(*status);
    }
    let once_each = by_user
        .values()
        .all(|s| s.iter().filter(|&&x| x == 201).count() == 1 && s.iter().all(|x| [200, 201].contains(x)));
    let mut outcomes = std::collections::BTreeMap::new();
    for (_, _, _, outcome, _) in &answers {
        *outcomes.entry(outcome.clone()).or_insert(0usize) += 1;
    }
    let latencies: Vec<Duration> = answers.iter().flat_map(|a| a.4.iter().copied()).collect();

    // 2. the draw, once its time has come
    let left = draw_at - OffsetDateTime::now_utc();
    if left.is_positive() {
        tokio::time::sleep(left.unsigned_abs()).await;
    }
    let drawing = Instant::now();
    let first_order = SystemTime::now();
    let revealed = hex::encode(&secret);
    let (drawn, _, _) = with_retries(drawing, || api.draw(&users.admin, &event, &revealed)).await;
    let draw_ms = drawing.elapsed().as_secs_f64() * 1000.0;
    if drawn.status != 200 {
        return Err(RunError::Setup(format!("the draw answered {}: {}", drawn.status, drawn.body)));
    }
    let published = api.published_draw(&users.tokens[0], &event).await;
    let published: Published = serde_json::from_value(published.body.clone())
        .map_err(|e| RunError::Setup(format!("the published draw: {e}: {}", published.body)))?;
    let capacity = (plan.tickets as usize).min(published.order.len());
    let (winners, losers) = published.order.split_at(capacity);
    report.ballot = Some(BallotPhase {
        entries: answers.len(),
        seconds: entry_seconds,
        latency: Latency::of(&latencies),
        outcomes,
        draw_ms,
        entrants: published.entrants.len(),
        winners: winners.len(),
        waiting: losers.len(),
    });

    // 3. every winner confirmed and mailed, through the ordinary order path
    let index: HashMap<&str, usize> =
        users.subs.iter().enumerate().filter_map(|(i, s)| Some((s.as_deref()?, i))).collect();
    let mut orders = HashMap::new();
    for user in winners {
        if let Some(&i) = index.get(user.as_str()) {
            let (answer, _, _) = with_retries(drawing, || api.order(&users.tokens[i], &event)).await;
            if let Some(order) = answer.body["order_id"].as_str() {
                orders.insert(order.to_owned(), i);
            }
        }
    }
    let (rows, confirmation) = wait_for_confirmation(api, users, plan, &event, &orders, first_order).await?;
    report.confirmation = confirmation;

    // 4. the checks
    let mut checks = vec![Check::new(
        "one entry per user (a second at the same time told 200)",
        once_each && by_user.len() == n && published.entrants.len() == n,
        format!(
            "{} users, {} entry requests, {} entrants drawn",
            by_user.len(),
            answers.len(),
            published.entrants.len()
        ),
    )];
    let verified = published.verify();
    let ours: HashSet<&str> = index.keys().copied().collect();
    let listed: HashSet<&str> = published.entrants.iter().map(String::as_str).collect();
    checks.push(Check::new(
        "the published draw recomputes (ticket-draw/v1) over exactly our entrants",
        verified.is_ok() && (ours.is_empty() || ours == listed),
        match &verified {
            Ok(()) => format!("root {}", published.root),
            Err(fault) => fault.to_string(),
        },
    ));
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
    let mut in_order = 0;
    let mut proven = 0;
    let mut sampled = 0;
    for (k, user) in losers.iter().enumerate().step_by(stride) {
        let Some(&i) = index.get(user.as_str()) else { continue };
        sampled += 1;
        let (place, _, _) = with_retries(drawing, || api.waitlist(&users.tokens[i], &event)).await;
        if place.body["position"].as_u64().is_some_and(|p| p as usize <= k + 1) {
            // Positions only move up as the places before are promoted.
            in_order += 1;
        }
        let (entry, _, _) = with_retries(drawing, || api.entry(&users.tokens[i], &event)).await;
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
