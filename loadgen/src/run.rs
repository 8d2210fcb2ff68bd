//! One sale, start to finish: release, wait for the opening, verify hashes, grabs, the wait for
//! every winner to be confirmed and mailed, and the invariants checked over HTTP.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    time::{Duration, Instant, SystemTime},
};

use futures::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use time::{OffsetDateTime, format_description::well_known::Rfc3339};

use crate::{
    api::{Answer, Api, Attendee},
    chart::Sample,
    report::{Check, Confirmation, GrabPhase, HashPhase, Latency, Pacing, Report},
};

/// A client gives up on one user after this many retried answers.
const MAX_ATTEMPTS: usize = 60;
/// The longest a client waits before asking again, whatever `Retry-After` says.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Who takes part: tokens for each user and for the organiser.
pub struct Users {
    pub admin: String,
    pub tokens: Vec<String>,
    /// The e-mail each token carries, where known (minted tokens), for the mailbox check.
    pub emails: Vec<Option<String>>,
    /// The user id (`sub`) each token carries, where known (minted tokens): a ballot's draw names
    /// its entrants by it.
    pub subs: Vec<Option<String>>,
}

/// What to run.
pub struct Plan {
    pub scenario: String,
    pub tickets: u32,
    pub concurrency: usize,
    /// Grab requests per user, all at once (the hot-user scenario sends 200 for one user).
    pub grabs_per_user: usize,
    /// How long after the release the sale opens.
    pub lead: Duration,
    pub confirm_timeout: Duration,
    /// MiniStack's base URL: where the mail the local SES accepted can be counted.
    pub mailbox: Option<String>,
    /// Hold the local runner's mail consumer from before the opening to the last grab reply, so
    /// the grabs have the emulator to themselves (as its raw `SendMessage` rate is measured).
    pub hold_mail: bool,
    /// Red packets: the total (smallest units) and its currency, split at release into one
    /// amount per ticket; every winner's reply must carry theirs.
    pub red_packets: Option<(u64, String)>,
    /// A fair open's users admitted per second (the tickets by default).
    pub admission_rate: Option<u32>,
    /// A ballot's or a fair open's work per entry (ticket-pow/v1, in bits), which each user
    /// solves before entering.
    pub proof_of_work_bits: Option<u32>,
    /// Where to write a ballot's or a fair open's published draw (for `ticketgrab-verify draw`).
    pub draw_out: Option<std::path::PathBuf>,
    /// Split the numbers over this many Redis buckets at release (a first-come sale).
    pub buckets: Option<u16>,
    /// Each user asks verify-hash, then grabs, from the opening (as people do); otherwise every
    /// hash is had before the opening and the opening is grabs alone.
    pub per_user: bool,
    /// Stop at the last grab reply: the replies checked, the drain neither waited for nor
    /// checked (the A/B of the rush in `scripts/bench ab`, where a sale's drain would take
    /// ten times its rush).
    pub rush_only: bool,
    /// Users started per second at the opening (each user's first request no earlier than its
    /// turn), or all at once; a fan-out spreads it over its workers.
    pub rate: Option<f64>,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Api(#[from] crate::api::Unexpected),
    #[error("{0}")]
    Setup(String),
}

/// What one user was told, over all their grab requests.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Told {
    /// Order ids named by a 202 or 200.
    pub orders: HashSet<String>,
    pub won: bool,
    /// Red-packet amounts named with them (one, for a user told of one order).
    pub amounts: HashSet<u64>,
}

pub async fn run(api: &Api, users: &Users, plan: &Plan) -> Result<Report, RunError> {
    let (event, opens, mut report) = release(api, users, plan).await?;

    // 1. every user's verify hash (available a few seconds before the opening); per user, each
    //    asks for it at the opening, just before grabbing
    let hashes: Vec<String> = if plan.per_user {
        Vec::new()
    } else {
        let bar = progress(users.tokens.len() as u64, "verify-hash");
        let had = hashes_before_opening(api, &users.tokens, &event, plan.concurrency, &bar).await;
        bar.finish_and_clear();
        let had = had.map_err(|missing| RunError::Setup(format!("user {missing} got no verify hash")))?;
        report.hashes =
            HashPhase { requests: had.latencies.len(), seconds: had.seconds, latency: Latency::of(&had.latencies) };
        had.hashes
    };

    if plan.hold_mail {
        switch_mail_consumer(api, users, false).await?;
    }

    // 2. the opening second
    let wait = opens - OffsetDateTime::now_utc();
    if wait.is_positive() {
        tokio::time::sleep(wait.unsigned_abs()).await;
    }

    // 3. the grabs: every user (or the hot user's burst) at once, `concurrency` in flight
    let crowd = Crowd {
        tokens: &users.tokens,
        event: &event,
        hashes: &hashes,
        grabs_per_user: plan.grabs_per_user,
        concurrency: plan.concurrency,
        rate: plan.rate,
    };
    let bar = progress((users.tokens.len() * plan.grabs_per_user) as u64, "grab");
    let first_grab = SystemTime::now();
    let started = Instant::now();
    let rushed = rush(api, &crowd, started, &bar).await;
    let grab_seconds = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    // Held, the consumer resumes at the last reply: the drain is measured from there too.
    let held_until = if plan.hold_mail {
        switch_mail_consumer(api, users, true).await?;
        Some(grab_seconds)
    } else {
        None
    };
    conclude(api, users, plan, &event, report, tally(plan, rushed, grab_seconds), first_grab, held_until).await
}

/// Releases the sale's event: its id, when it opens (`plan.lead` from now) and the report begun.
pub async fn release(api: &Api, users: &Users, plan: &Plan) -> Result<(String, OffsetDateTime, Report), RunError> {
    let n = users.tokens.len();
    let event = format!("lg-{}-{}", plan.scenario, uuid::Uuid::now_v7().simple());
    let now = OffsetDateTime::now_utc();
    let opens = now + plan.lead;
    let report = Report {
        scenario: plan.scenario.clone(),
        base_url: String::new(),
        event_id: event.clone(),
        users: n,
        tickets: plan.tickets,
        concurrency: plan.concurrency,
        started_at: now.format(&Rfc3339).unwrap_or_default(),
        ..Report::default()
    };

    let mut release = json!({
        "id": event,
        "title": format!("loadgen {}", plan.scenario),
        "capacity": plan.tickets,
        "sale_start": opens.format(&Rfc3339).unwrap_or_default(),
        "sale_end": (opens + time::Duration::hours(1)).format(&Rfc3339).unwrap_or_default(),
    });
    if let Some((total, currency)) = &plan.red_packets {
        release["total_amount"] = json!(total);
        release["currency"] = json!(currency);
    }
    if let Some(buckets) = plan.buckets {
        release["buckets"] = json!(buckets);
    }
    let released = api.release(&users.admin, &release).await;
    if released.status != 201 {
        return Err(RunError::Setup(format!("release answered {}: {}", released.status, released.body)));
    }
    Ok((event, opens, report))
}

/// Every user's verify hash, had before the opening (`concurrency` asks in flight).
pub struct Hashes {
    pub hashes: Vec<String>,
    /// Every verify-hash request's latency, retries included.
    pub latencies: Vec<Duration>,
    pub seconds: f64,
}

/// Asks each token's verify hash; `Err(i)`: user `i` (of `tokens`) got none.
pub async fn hashes_before_opening(
    api: &Api,
    tokens: &[String],
    event: &str,
    concurrency: usize,
    bar: &ProgressBar,
) -> Result<Hashes, usize> {
    let started = Instant::now();
    let results: Vec<(String, Vec<Duration>)> = futures::stream::iter(tokens.iter())
        .map(|token| async move {
            let answer = hash_of(api, token, event, started).await;
            bar.inc(1);
            answer
        })
        .buffered(concurrency.max(1))
        .collect()
        .await;
    let latencies: Vec<Duration> = results.iter().flat_map(|(_, l)| l.iter().copied()).collect();
    let hashes: Vec<String> = results.into_iter().map(|(h, _)| h).collect();
    if let Some(missing) = hashes.iter().position(String::is_empty) {
        return Err(missing);
    }
    Ok(Hashes { hashes, latencies, seconds: started.elapsed().as_secs_f64() })
}

/// Who rushes, and how: one process's whole crowd, or one load worker's slice of it
/// (`crate::fanout`). The users are numbered from 0 within it.
pub struct Crowd<'a> {
    pub tokens: &'a [String],
    pub event: &'a str,
    /// Each user's hash, had before the opening; empty: each user asks verify-hash first, then
    /// grabs (per user).
    pub hashes: &'a [String],
    /// Grab requests per user, all at once (the hot user's 200).
    pub grabs_per_user: usize,
    pub concurrency: usize,
    /// Users started per second: user `u` sends its first request no earlier than `u / rate`
    /// seconds after the start (and no later than a free slot of `concurrency` allows). `None`:
    /// every user at once.
    pub rate: Option<f64>,
}

/// A user's grab, asked until final: the user, the last answer, every request, the retried outcomes.
pub type Answered = (usize, Answer, Vec<Sample>, Vec<String>);

/// A user's part in the rush: their grab, when they began (their first request, seconds after the
/// start) and, per user, the latency of each verify-hash request they asked before grabbing.
#[derive(Debug, Clone)]
pub struct Rushed {
    pub answered: Answered,
    pub began_s: f64,
    pub hash_latencies: Vec<Duration>,
}

/// The opening: every user of the crowd grabs (asking verify-hash first, per user), each asked
/// until final, `concurrency` in flight; samples are timed from `started`. The grab, the retries
/// and the latencies of every run, one process's or a load worker's, are these.
pub async fn rush(api: &Api, crowd: &Crowd<'_>, started: Instant, bar: &ProgressBar) -> Vec<Rushed> {
    let jobs: Vec<usize> = (0..crowd.tokens.len()).flat_map(|u| std::iter::repeat_n(u, crowd.grabs_per_user)).collect();
    let hot = crowd.grabs_per_user > 1;
    let per_user = crowd.hashes.is_empty();
    futures::stream::iter(jobs)
        .map(|u| async move {
            if let Some(rate) = crowd.rate.filter(|r| *r > 0.0) {
                tokio::time::sleep_until((started + Duration::from_secs_f64(u as f64 / rate)).into()).await;
            }
            let began_s = started.elapsed().as_secs_f64();
            let (token, event) = (&crowd.tokens[u], crowd.event);
            let (hash, hash_latencies) = if per_user {
                hash_of(api, token, event, started).await
            } else {
                (crowd.hashes[u].clone(), Vec::new())
            };
            let hash = &hash;
            // The hot user's 429s are the point of that scenario: counted, not retried.
            let (last, latencies, retried) = if hot {
                let at_s = started.elapsed().as_secs_f64();
                let a = api.grab(token, event, hash).await;
                let sample = Sample { at_s, latency: a.latency, outcome: a.outcome() };
                (a, vec![sample], Vec::new())
            } else {
                with_retries(started, || api.grab(token, event, hash)).await
            };
            bar.inc(1);
            Rushed { answered: (u, last, latencies, retried), began_s, hash_latencies }
        })
        .buffer_unordered(crowd.concurrency.max(1))
        .collect()
        .await
}

/// What the rush's replies add up to, before any drain: the grab phase of the report (and, per
/// user, its verify-hash phase), the samples, and what each user was told. Pure: one process's
/// rush and the merged slices of a fan-out give the same tally for the same answers.
pub struct Tally {
    /// Per user: the verify-hash requests asked during the rush.
    pub hashes: Option<HashPhase>,
    pub grabs: GrabPhase,
    pub samples: Vec<Sample>,
    pub told: HashMap<usize, Told>,
    pub answers: Vec<Answered>,
    pub pacing: Option<Pacing>,
}

pub fn tally(plan: &Plan, rushed: Vec<Rushed>, grab_seconds: f64) -> Tally {
    let hashes = plan.per_user.then(|| {
        let latencies: Vec<Duration> = rushed.iter().flat_map(|r| r.hash_latencies.iter().copied()).collect();
        HashPhase { requests: latencies.len(), seconds: grab_seconds, latency: Latency::of(&latencies) }
    });
    // When each user began: how fast the crowd came (the pacing's result).
    let mut began: HashMap<usize, f64> = HashMap::new();
    for r in &rushed {
        let at = began.entry(r.answered.0).or_insert(r.began_s);
        *at = at.min(r.began_s);
    }
    let answers: Vec<Answered> = rushed.into_iter().map(|r| r.answered).collect();
    let mut told: HashMap<usize, Told> = HashMap::new();
    let mut grabs = GrabPhase { seconds: grab_seconds, ..GrabPhase::default() };
    let (mut all, mut won, mut refused, mut samples) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (u, last, sent, retried) in &answers {
        all.extend(sent.iter().map(|s| s.latency));
        samples.extend(sent.iter().cloned());
        for code in retried {
            *grabs.retried.entry(code.clone()).or_default() += 1;
        }
        *grabs.outcomes.entry(last.outcome()).or_default() += 1;
        match last.status {
            202 => won.push(last.latency),
            409 => refused.push(last.latency),
            _ => {}
        }
        if matches!(last.status, 200 | 202) {
            let entry = told.entry(*u).or_default();
            entry.won |= last.status == 202;
            if let Some(order) = last.body["order_id"].as_str() {
                entry.orders.insert(order.to_owned());
            }
            if let Some(amount) = last.body["amount"]["value"].as_u64() {
                entry.amounts.insert(amount);
            }
        }
    }
    grabs.requests = all.len();
    grabs.grabs_per_sec = all.len() as f64 / grab_seconds.max(1e-9);
    grabs.latency = Latency::of(&all);
    grabs.latency_won = Latency::of(&won);
    grabs.latency_refused = Latency::of(&refused);
    let pacing = plan.rate.map(|target| {
        let (first, last) = began.values().fold((f64::INFINITY, 0.0_f64), |(lo, hi), &t| (lo.min(t), hi.max(t)));
        let spread = if began.is_empty() { 0.0 } else { last - first };
        let achieved = if spread > 0.0 { (began.len() - 1) as f64 / spread } else { began.len() as f64 };
        Pacing { target_users_per_s: target, achieved_users_per_s: achieved, spread_s: spread }
    });
    Tally { hashes, grabs, samples, told, answers, pacing }
}

/// After the rush: the report's phases from its tally, then (unless the run stops at the last
/// reply) the wait for every winner to be confirmed and mailed, and the invariants.
#[allow(clippy::too_many_arguments)]
pub async fn conclude(
    api: &Api,
    users: &Users,
    plan: &Plan,
    event: &str,
    mut report: Report,
    tally: Tally,
    first_grab: SystemTime,
    held_until: Option<f64>,
) -> Result<Report, RunError> {
    let Tally { hashes, grabs, samples, told, answers, pacing } = tally;
    if let Some(hashes) = hashes {
        report.hashes = hashes;
    }
    report.grabs = grabs;
    report.timeline.grabs = samples;
    report.pacing = pacing;
    if plan.rush_only {
        report.checks = reply_checks(users, plan, &answers, &told);
        report.passed = report.checks.iter().all(|c| c.pass);
        return Ok(report);
    }

    // 4. every winner confirmed and mailed
    let winners: HashMap<String, usize> =
        told.iter().flat_map(|(u, t)| t.orders.iter().map(move |o| (o.clone(), *u))).collect();
    let (rows, confirmation) = wait_for_confirmation(api, users, plan, event, &winners, first_grab).await?;
    let since_first = |stamp: &Option<String>| seconds_after(stamp.as_deref()?, first_grab);
    let confirmed = rows.iter().filter(|r| r.status == "CONFIRMED");
    report.timeline.confirmed_s = confirmed.clone().filter_map(|r| since_first(&r.confirmed_at)).collect();
    report.timeline.mailed_s = confirmed.filter_map(|r| since_first(&r.mailed_at)).collect();
    report.confirmation = Confirmation { mail_held_until_s: held_until, ..confirmation };

    // 5. the invariants
    report.checks = check(api, users, plan, event, &answers, &told, &rows, &report.confirmation).await?;
    report.passed = report.checks.iter().all(|c| c.pass);
    Ok(report)
}

async fn switch_mail_consumer(api: &Api, users: &Users, enabled: bool) -> Result<(), RunError> {
    let answer = api.switch_mail_consumer(&users.admin, enabled).await;
    if answer.status != 200 || answer.body["enabled"] != enabled {
        return Err(RunError::Setup(format!(
            "--hold-mail needs the local runner's mail-consumer switch; it answered {}: {}",
            answer.status, answer.body
        )));
    }
    Ok(())
}

/// A user's verify hash (asked until final) and the latency of each ask; empty when none came.
async fn hash_of(api: &Api, token: &str, event: &str, origin: Instant) -> (String, Vec<Duration>) {
    let (last, samples, _) = with_retries(origin, || api.verify_hash(token, event)).await;
    (last.body["hash"].as_str().unwrap_or_default().to_owned(), samples.iter().map(|s| s.latency).collect())
}

/// Asks until the answer is final (not 503, 429, a transport failure or "not started yet"),
/// waiting as `Retry-After` says (capped). Returns the final answer, every request (when it was
/// sent, after `origin`; its latency and outcome) and the outcomes that were retried.
pub(crate) async fn with_retries<F, Fut>(origin: Instant, mut ask: F) -> (Answer, Vec<Sample>, Vec<String>)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Answer>,
{
    let mut latencies = Vec::new();
    let mut retried = Vec::new();
    loop {
        let at_s = origin.elapsed().as_secs_f64();
        let answer = ask().await;
        latencies.push(Sample { at_s, latency: answer.latency, outcome: answer.outcome() });
        if !answer.retryable() || latencies.len() >= MAX_ATTEMPTS {
            return (answer, latencies, retried);
        }
        retried.push(answer.outcome());
        let pause = match answer.code() {
            "SALE_NOT_STARTED" => Duration::from_millis(20),
            _ => answer.retry_after.unwrap_or(Duration::from_millis(100)).min(MAX_BACKOFF),
        };
        tokio::time::sleep(pause).await;
    }
}

/// Waits until every winner is `CONFIRMED` and mailed, disturbing the drain as little as it can:
/// reading the whole attendee list is heavy for an emulator that is draining the queue (a first
/// version that polled it slowed the red-packet drain several times over). So the wait follows
/// the drain with a sparse probe: winners sorted by order id (UUIDv7: the order they were granted,
/// which the queue roughly keeps), one in `stride` asked for its own order, a few hundred cheap
/// reads in all; the list is read once the last probe is confirmed, and again only if some mail
/// is still being sent.
pub(crate) async fn wait_for_confirmation(
    api: &Api,
    users: &Users,
    plan: &Plan,
    event: &str,
    winners: &HashMap<String, usize>,
    first_grab: SystemTime,
) -> Result<(Vec<Attendee>, Confirmation), RunError> {
    let started = Instant::now();
    let spinner = ProgressBar::new_spinner();
    spinner.enable_steady_tick(Duration::from_millis(200));
    let mut probes: Vec<(&str, usize)> = winners.iter().map(|(o, u)| (o.as_str(), *u)).collect();
    probes.sort_unstable();
    let stride = (probes.len() / 200).max(1);
    let mut next = 0;
    let mut polls = 0;
    let mut rows = None;
    while started.elapsed() < plan.confirm_timeout {
        if let Some(&(_, user)) = probes.get(next) {
            let answer = api.order(&users.tokens[user], event).await;
            polls += 1;
            if matches!(answer.body["status"].as_str(), Some("CONFIRMED" | "REJECTED")) {
                next += stride;
                spinner.set_message(format!("about {}/{} confirmed", next.min(probes.len()), probes.len()));
            } else {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            continue;
        }
        let list = api.attendees(&users.admin, event).await?;
        polls += 1;
        let confirmed = list.iter().filter(|r| r.status == "CONFIRMED").count();
        let mailed = list.iter().filter(|r| r.mail_status.as_deref() == Some("SENT")).count();
        spinner.set_message(format!("{confirmed}/{} confirmed, {mailed} mailed", winners.len()));
        let done = confirmed >= winners.len() && mailed == confirmed;
        rows = Some(list);
        if done {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let rows = match rows {
        Some(rows) => rows,
        None => api.attendees(&users.admin, event).await?,
    };
    spinner.finish_and_clear();
    let after = |stamp: &Option<String>| seconds_after(stamp.as_deref()?, first_grab);
    let confirmed: Vec<&Attendee> = rows.iter().filter(|r| r.status == "CONFIRMED").collect();
    let mut rejected = 0;
    // Winners missing from the list: their own order query says whether they were rejected.
    let listed: HashSet<&str> = rows.iter().map(|r| r.order_id.as_str()).collect();
    for (order, user) in winners {
        if !listed.contains(order.as_str()) {
            let answer = api.order(&users.tokens[*user], event).await;
            if answer.body["status"] == "REJECTED" {
                rejected += 1;
            }
        }
    }
    let confirmation = Confirmation {
        winners: winners.len(),
        confirmed: confirmed.len(),
        rejected,
        mailed: confirmed.iter().filter(|r| r.mail_status.as_deref() == Some("SENT")).count(),
        last_confirmed_after_s: confirmed.iter().filter_map(|r| after(&r.confirmed_at)).reduce(f64::max),
        last_mail_after_s: confirmed.iter().filter_map(|r| after(&r.mailed_at)).reduce(f64::max),
        waited_s: started.elapsed().as_secs_f64(),
        polls,
        mail_held_until_s: None,
    };
    Ok((rows, confirmation))
}

/// docs/DESIGN.md section 13 as a client can see it: the replies, the attendee list, each user's order,
/// the live stock, and (locally) the mail the emulator accepted.
#[allow(clippy::too_many_arguments)]
async fn check(
    api: &Api,
    users: &Users,
    plan: &Plan,
    event: &str,
    answers: &[Answered],
    told: &HashMap<usize, Told>,
    rows: &[Attendee],
    confirmation: &Confirmation,
) -> Result<Vec<Check>, RunError> {
    let capacity = plan.tickets as usize;
    let mut checks = reply_checks(users, plan, answers, told);

    let confirmed: Vec<&Attendee> = rows.iter().filter(|r| r.status == "CONFIRMED").collect();
    let tickets: HashSet<u32> = confirmed.iter().map(|r| r.ticket_no).collect();
    let holders: HashSet<&str> = confirmed.iter().map(|r| r.user_id.as_str()).collect();
    let order_ids: HashSet<&str> = confirmed.iter().map(|r| r.order_id.as_str()).collect();
    let in_range = confirmed.iter().all(|r| (1..=plan.tickets).contains(&r.ticket_no));
    checks.push(Check::new(
        "confirmed <= capacity",
        confirmed.len() <= capacity,
        format!("{} confirmed of {capacity}", confirmed.len()),
    ));
    checks.push(Check::new(
        "ticket numbers distinct and within 1..capacity",
        tickets.len() == confirmed.len() && in_range,
        format!("{} distinct of {}", tickets.len(), confirmed.len()),
    ));
    checks.push(Check::new(
        "no user holds two orders; order ids unique",
        holders.len() == confirmed.len() && order_ids.len() == confirmed.len(),
        format!("{} holders, {} order ids, {} orders", holders.len(), order_ids.len(), confirmed.len()),
    ));

    let promised: HashSet<&str> = told.values().flat_map(|t| t.orders.iter().map(String::as_str)).collect();
    let missing = promised.iter().filter(|o| !order_ids.contains(**o)).count();
    let lost = missing.saturating_sub(confirmation.rejected);
    let unpromised = order_ids.iter().filter(|o| !promised.contains(**o)).count();
    checks.push(Check::new(
        "every OK reply is one durable order (CONFIRMED or REJECTED)",
        lost == 0,
        format!(
            "{} promised: {} confirmed, {} rejected, {lost} not durable",
            promised.len(),
            promised.len() - missing,
            confirmation.rejected
        ),
    ));
    checks.push(Check::new(
        "no confirmed order nobody was told of",
        unpromised == 0,
        format!("{unpromised} confirmed orders without a 202"),
    ));
    checks.push(Check::new(
        "one confirmation mail per confirmed order",
        confirmation.mailed == confirmed.len(),
        format!("{} of {} confirmed orders mailed (mail_status SENT)", confirmation.mailed, confirmed.len()),
    ));

    if let Some((total, currency)) = &plan.red_packets {
        let told_of_order: Vec<&Told> = told.values().filter(|t| !t.orders.is_empty()).collect();
        let one_each = told_of_order.iter().filter(|t| t.amounts.len() == 1 && !t.amounts.contains(&0)).count();
        checks.push(Check::new(
            "red packets: every winner told one amount, at least one unit",
            one_each == told_of_order.len(),
            format!("{one_each} of {} users told of an order were told one amount", told_of_order.len()),
        ));
        let won: u64 = told.values().filter(|t| !t.orders.is_empty()).flat_map(|t| t.amounts.iter()).sum();
        let sold_out = confirmed.len() == capacity;
        checks.push(Check::new(
            "red packets: the amounts won sum to the total when sold out (at most it otherwise)",
            if sold_out { won == *total } else { won <= *total },
            format!("{won} of {total} {currency} units won, {} of {capacity} packets", confirmed.len()),
        ));
    }

    let remaining = api.remaining(&users.tokens[0], event).await?;
    checks.push(Check::new(
        "free numbers = capacity - confirmed",
        remaining as usize + confirmed.len() == capacity,
        format!("remaining {remaining} + confirmed {} vs capacity {capacity}", confirmed.len()),
    ));

    checks.extend(mailbox_check(plan, users, confirmed.len()).await?);
    Ok(checks)
}

/// What the replies alone show: every grab answered, one order per user, every ticket granted
/// while demand lasts.
pub fn reply_checks(users: &Users, plan: &Plan, answers: &[Answered], told: &HashMap<usize, Told>) -> Vec<Check> {
    let capacity = plan.tickets as usize;
    let mut checks = Vec::new();
    let unanswered: BTreeMap<String, usize> = answers
        .iter()
        .filter(|(_, a, ..)| !matches!(a.status, 200 | 202 | 409 | 429))
        .fold(BTreeMap::new(), |mut m, (_, a, ..)| {
            *m.entry(a.outcome()).or_default() += 1;
            m
        });
    checks.push(Check::new(
        "every grab answered",
        unanswered.is_empty(),
        if unanswered.is_empty() { "202, 200, 409 or (hot user) 429 only".into() } else { format!("{unanswered:?}") },
    ));

    let two_orders = told.values().filter(|t| t.orders.len() > 1).count();
    checks.push(Check::new(
        "one order per user in the replies",
        two_orders == 0,
        format!("{} users told of an order, {two_orders} of more than one", told.len()),
    ));

    // A user whose 202 was lost (a 503 or a dropped connection, then the retry) learns their order
    // from the retry's 200: served, but only after such a retry, and with an order no one else was
    // told of.
    let retried_users: HashSet<usize> = answers.iter().filter(|(.., r)| !r.is_empty()).map(|(u, ..)| *u).collect();
    let winners = told.iter().filter(|(u, t)| t.won || (!t.orders.is_empty() && retried_users.contains(u))).count();
    let first_told = told.values().filter(|t| t.won).count();
    let orders_told: Vec<&String> = told.values().flat_map(|t| t.orders.iter()).collect();
    let distinct_orders: HashSet<&String> = orders_told.iter().copied().collect();
    let expected = if plan.grabs_per_user > 1 { 1 } else { users.tokens.len().min(capacity) };
    checks.push(Check::new(
        "every ticket sold while demand lasts, none twice",
        winners == expected && distinct_orders.len() == orders_told.len(),
        format!(
            "{winners} users told of an order ({first_told} by a 202, the rest by a retry's 200), \
             expected min(users, tickets) = {expected}; {} order ids told, {} distinct",
            orders_told.len(),
            distinct_orders.len()
        ),
    ));
    checks
}

/// With a mailbox (the local SES): one mail really sent per confirmed order, to distinct users.
pub(crate) async fn mailbox_check(plan: &Plan, users: &Users, confirmed: usize) -> Result<Option<Check>, RunError> {
    let Some(mailbox) = &plan.mailbox else { return Ok(None) };
    let sent = local_runner::mailbox::sent(mailbox).await.map_err(RunError::Setup)?;
    let ours: HashSet<&str> = users.emails.iter().flatten().map(String::as_str).collect();
    let to: Vec<&str> =
        sent.iter().flat_map(|m| m.to.iter().map(String::as_str)).filter(|t| ours.contains(t)).collect();
    let distinct: HashSet<&str> = to.iter().copied().collect();
    Ok(Some(Check::new(
        "mail really sent: one per confirmed order (the local SES)",
        to.len() == confirmed && distinct.len() == to.len(),
        format!("{} mails to {} addresses, {confirmed} confirmed", to.len(), distinct.len()),
    )))
}

pub(crate) fn progress(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template("{prefix:>12} [{bar:40}] {pos}/{len} {per_sec} {elapsed}") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(what.to_owned());
    bar
}

/// An RFC 3339 time as seconds after `first`.
fn seconds_after(stamp: &str, first: SystemTime) -> Option<f64> {
    let t = OffsetDateTime::parse(stamp, &Rfc3339).ok()?;
    Some((t - OffsetDateTime::from(first)).as_seconds_f64())
}
