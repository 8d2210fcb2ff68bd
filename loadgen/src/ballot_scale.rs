//! `loadgen ballot-scale`: a ballot of a million entrants, as a benchmark. The organiser releases
//! a ballot; `--through-runner` minted users enter through the runner over HTTP (their rate and
//! latency measured); the other entrants are loaded straight into the table
//! ([`Store::load_entries`]: 25 a `BatchWriteItem`, unconditioned), since the emulator's ~1,100
//! `TransactWriteItems` a second would take a quarter of an hour for a million; at the entries'
//! close the organiser draws through the API; then the whole published draw is read page by page,
//! joined, recomputed and written out, and one HTTP entrant asks for their place and proof.
//!
//! Every phase is timed, the runner's resident memory (`VmRSS`, and its peak `VmHWM`, from
//! `/proc/<pid>/status` with `--runner-pid`) is read between the phases, and the figures are
//! printed and written as JSON (`--json`).
//!
//! The draw is asked again while it answers `202` (it reads the entries' shards a wave an ask) or
//! a 5xx. Should the runner still not finish it (`--draw-attempts`), the run says so with the
//! figures of where the time goes (one page of a shard's `Query`, timed here: MiniStack sorts and
//! filters a whole partition for every 1 MB page) and computes the draw itself from the same
//! leaves with the product's own code ([`draw::Compact::draw`]), so the publication's size and the
//! verifier's figures are still measured: the report names which it is. Either way it sizes the structures the draw holds at this many entrants, from their
//! types ([`Sizes`]).

use std::{
    collections::BTreeMap,
    path::PathBuf,
    time::{Duration, Instant},
};

use futures::StreamExt;
use serde::Serialize;
use serde_json::json;
use shared::{
    domain::{
        Email, EventId, UserId,
        draw::{self, Algorithm, EntryKey, PAGE_PLACES, ProofStep, Published},
        event::rfc3339,
        hex,
        sale_mode::{Entrant, EntryShards},
    },
    setup::Adapters,
    store::{Store, draws::RollEntry},
};
use time::{OffsetDateTime, format_description::well_known::Rfc3339};

use crate::{
    api::Api,
    report::Latency,
    run::{RunError, Users, progress, with_retries},
};

/// Entrants generated and loaded at a time (400 `BatchWriteItem`s of 25, 16 at once).
const LOAD_CHUNK: usize = 10_000;
/// More pages than this is a draw that does not end (`next` going round).
const MAX_PAGES: usize = 100_000;
/// Tries of one page before giving up (429s waited out as `Retry-After` says)...
const PAGE_TRIES: usize = 120;
/// ... and of them failures (a 5xx, a transport error: a second apart).
const PAGE_FAILURES: usize = 5;

/// One HTTP entrant's answer: its last status and outcome, every request's latency, the outcomes
/// asked again, and the leaf a 201 or 200 gave.
struct Entered {
    user: usize,
    status: u16,
    outcome: String,
    latencies: Vec<Duration>,
    retried: Vec<String>,
    leaf: String,
}

/// What to run.
pub struct Scale {
    /// Entrants in all (`--entrants`).
    pub entrants: usize,
    /// Of them, entering through the runner over HTTP (`--through-runner`): the minted users.
    pub through_runner: usize,
    pub tickets: u32,
    pub concurrency: usize,
    /// The entries' close (the sale's start) this far after the release; by default from
    /// `through_runner` at `entry_rate_floor` a second, with a minute's margin.
    pub lead: Option<Duration>,
    pub entry_rate_floor: f64,
    /// The client's patience with the draw and with each page: far above the functions' own
    /// timeouts, so that the runner's answer (or its 500 at the function's timeout) is measured.
    pub http_timeout: Duration,
    /// Requests of the draw at most (a draw cut off at the function's timeout goes on from where
    /// it stopped when asked again).
    pub draw_attempts: usize,
    pub draw_out: Option<PathBuf>,
    pub runner_pid: Option<u32>,
    pub emulator_pid: Option<u32>,
}

/// A process's resident memory, from `/proc/<pid>/status`, in MiB.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Memory {
    /// Now (`VmRSS`).
    pub rss_mib: f64,
    /// The peak so far (`VmHWM`).
    pub peak_mib: f64,
}

impl Memory {
    pub fn of(pid: u32) -> Option<Self> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
                .map(|kib| kib / 1024.0)
        };
        Some(Self { rss_mib: field("VmRSS:")?, peak_mib: field("VmHWM:")? })
    }

    fn own() -> Option<Self> {
        Self::of(std::process::id())
    }
}

/// The processes' memory at one point of the run.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    pub at: &'static str,
    /// Seconds since the release.
    pub after_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runner: Option<Memory>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emulator: Option<Memory>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loadgen: Option<Memory>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct HttpEntries {
    pub users: usize,
    /// Accepted (201).
    pub accepted: usize,
    pub seconds: f64,
    pub entries_per_sec: f64,
    /// Every request, retries included.
    pub latency: Latency,
    /// Each user's last answer, by `status CODE`.
    pub outcomes: BTreeMap<String, usize>,
    /// Answers that were asked again (429, 503, transport), by `status CODE`.
    pub retried: BTreeMap<String, usize>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct BulkLoad {
    pub entries: usize,
    pub seconds: f64,
    pub entries_per_sec: f64,
    pub batch_write_items: usize,
    pub how: &'static str,
}

/// One `Query` page of the event's entries, as the draw's read asks it, timed on the emulator.
#[derive(Debug, Clone, Default, Serialize)]
pub struct QueryProbe {
    pub items: usize,
    pub seconds: f64,
    /// Pages the whole read takes at this page's size, and their time at this page's speed.
    pub pages_estimated: usize,
    pub read_seconds_estimated: f64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct DrawPhase {
    /// `POST /admin/events/{id}/draw`: its last status, the time from the first request to the
    /// last answer, and the last reply. A draw cut off (a 5xx: the function's timeout) is finished
    /// by asking again, as an organiser does: up to `--draw-attempts` requests.
    pub status: u16,
    pub ms: f64,
    pub reply: serde_json::Value,
    /// Each request: its status and time (ms).
    pub attempts: Vec<(u16, f64)>,
    /// The draw the rest measures: `runner` (read back through `GET /draw`) or `loadgen` (the
    /// runner could not draw: computed here from the same leaves).
    pub source: String,
    /// The draw computed here (the root and the shuffle, as the release function does after its
    /// reads), ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub computed_ms: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Publication {
    /// Read over HTTP (`GET /events/{id}/draw?from=`), or sized from the computed draw's pages.
    pub read_over_http: bool,
    pub pages: usize,
    pub bytes: u64,
    pub bytes_per_entrant: f64,
    pub seconds: f64,
    /// The first page (the query function recomputes the draw from the table to answer it).
    pub first_page_ms: f64,
    /// The other pages (served from memory).
    pub other_pages: Latency,
    pub throttled_429: usize,
    pub failed_5xx: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// The whole draw as `--draw-out` wrote it.
    pub file_bytes: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Verification {
    pub join_ms: f64,
    pub verify_ms: f64,
    pub holds: bool,
    pub detail: String,
    /// The draw's leaves are exactly the entrants': the HTTP entries' leaves and the loaded ones'.
    pub leaves_are_ours: bool,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Lookup {
    pub status: u16,
    pub ms: f64,
    pub draw_position: Option<u64>,
    pub proof_steps: usize,
    /// The place is the leaf's in the joined draw, and the proof leads from the leaf to the root.
    pub proven: bool,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ScaleReport {
    pub scenario: &'static str,
    pub base_url: String,
    pub event_id: String,
    pub started_at: String,
    pub entrants: usize,
    pub through_runner: usize,
    pub tickets: u32,
    pub concurrency: usize,
    /// The release to the entries' close (the sale's start).
    pub lead_seconds: f64,
    pub http_entries: HttpEntries,
    pub bulk: BulkLoad,
    pub waited_for_close_seconds: f64,
    pub query_probe: Option<QueryProbe>,
    pub draw: DrawPhase,
    /// Whether the runner drew (`POST /draw` answered 200): else the draw is computed here.
    pub runner_drew: bool,
    pub sizes: Sizes,
    pub publication: Publication,
    pub verification: Verification,
    pub lookup: Option<Lookup>,
    pub memory: Vec<Snapshot>,
    pub total_seconds: f64,
    pub notes: Vec<String>,
    pub passed: bool,
}

/// The run: see the module's doc. `users`: the minted users who enter through the runner.
pub async fn run(api: &Api, base_url: &str, users: &Users, scale: &Scale) -> Result<ScaleReport, RunError> {
    let setup = |e: &dyn std::fmt::Display| RunError::Setup(e.to_string());
    let n = scale.entrants.max(1);
    let m = scale.through_runner.min(n).min(users.tokens.len());
    let run_id = &uuid::Uuid::now_v7().simple().to_string()[20..];
    let event = format!("bs-{}", uuid::Uuid::now_v7().simple());
    let event_id = EventId::parse(&event).map_err(|e| setup(&e))?;
    let mut report = ScaleReport {
        scenario: "ballot-scale",
        base_url: base_url.to_owned(),
        event_id: event.clone(),
        started_at: OffsetDateTime::now_utc().format(&Rfc3339).unwrap_or_default(),
        entrants: n,
        through_runner: m,
        tickets: scale.tickets,
        concurrency: scale.concurrency,
        ..ScaleReport::default()
    };
    // The table, as the runner reaches it (its settings from the same environment), with the
    // patience of a bulk load and of a probe that may take a while.
    let settings = local_runner::LocalSettings::from_env().map_err(|e| setup(&e))?;
    let sdk = settings
        .sdk_config()
        .await
        .into_builder()
        .timeout_config(
            aws_config::timeout::TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(5))
                .operation_attempt_timeout(Duration::from_secs(600))
                .operation_timeout(Duration::from_secs(1800))
                .build(),
        )
        .build();
    let store = Adapters::new(sdk).store(&settings.store);
    let http =
        local_runner::client::builder().timeout(scale.http_timeout).tcp_nodelay(true).build().map_err(|e| setup(&e))?;
    let base = base_url.trim_end_matches('/').to_owned();

    // 1. The release: a ballot whose entries close (and which may be drawn) `lead` from now.
    let lead = scale.lead.unwrap_or_else(|| Duration::from_secs_f64(m as f64 / scale.entry_rate_floor.max(1.0) + 60.0));
    report.lead_seconds = lead.as_secs_f64();
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|e| setup(&e))?;
    let released_at = OffsetDateTime::now_utc();
    let close = released_at + lead;
    let release = json!({
        "id": event,
        "title": format!("ballot-scale: {n} entrants"),
        "capacity": scale.tickets,
        "sale_mode": "ballot",
        "draw_commitment": draw::commitment(&secret),
        "sale_start": close.format(&Rfc3339).unwrap_or_default(),
        "sale_end": (close + time::Duration::hours(12)).format(&Rfc3339).unwrap_or_default(),
    });
    let released = api.release(&users.admin, &release).await;
    if released.status != 201 {
        return Err(RunError::Setup(format!("release answered {}: {}", released.status, released.body)));
    }
    let origin = Instant::now();
    let mut memory = Vec::new();
    let snap = |at: &'static str, memory: &mut Vec<Snapshot>| {
        let s = Snapshot {
            at,
            after_s: origin.elapsed().as_secs_f64(),
            runner: scale.runner_pid.and_then(Memory::of),
            emulator: scale.emulator_pid.and_then(Memory::of),
            loadgen: Memory::own(),
        };
        eprintln!("ballot-scale: {at} ({:.0} s): {}", s.after_s, memory_line(&s));
        memory.push(s);
    };
    snap("released", &mut memory);

    // 2. The entries through the runner, `concurrency` at a time.
    eprintln!(
        "ballot-scale: {m} entries through the runner ({} at once), the close in {:.0} s",
        scale.concurrency,
        lead.as_secs_f64()
    );
    let bar = progress(m as u64, "entries");
    let started = Instant::now();
    let answers: Vec<Entered> = futures::stream::iter(0..m)
        .map(|user| {
            let (api, event, bar, token) = (api.clone(), event.clone(), bar.clone(), &users.tokens[user]);
            async move {
                let (last, samples, retried) = with_retries(started, || api.enter(token, &event, None)).await;
                bar.inc(1);
                let text = |k: &str| last.body[k].as_str().unwrap_or_default().to_owned();
                Entered {
                    user,
                    leaf: text("leaf"),
                    status: last.status,
                    outcome: last.outcome(),
                    latencies: samples.iter().map(|s| s.latency).collect(),
                    retried,
                }
            }
        })
        .buffer_unordered(scale.concurrency.max(1))
        .collect()
        .await;
    bar.finish_and_clear();
    let seconds = started.elapsed().as_secs_f64();
    let mut entries = HttpEntries { users: m, seconds, ..HttpEntries::default() };
    let mut latencies = Vec::new();
    let mut http_leaves: Vec<Option<String>> = vec![None; m];
    // Each entrant as the draw reads them (their user, address and key), for sizing.
    let mut http_entrants = Vec::with_capacity(m);
    for Entered { user, status, outcome, latencies: samples, retried, leaf } in answers {
        *entries.outcomes.entry(outcome).or_default() += 1;
        for r in retried {
            *entries.retried.entry(r).or_default() += 1;
        }
        latencies.extend(samples);
        if status == 201 {
            entries.accepted += 1;
        }
        if [200, 201].contains(&status) && !leaf.is_empty() {
            http_leaves[user] = Some(leaf);
            if let (Some(sub), Some(email)) = (&users.subs[user], &users.emails[user]) {
                http_entrants.push((sub.clone(), email.clone()));
            }
        }
    }
    entries.entries_per_sec = entries.accepted as f64 / seconds.max(1e-9);
    entries.latency = Latency::of(&latencies);
    report.http_entries = entries;
    snap("after the HTTP entries", &mut memory);
    if OffsetDateTime::now_utc() >= close {
        report.notes.push(format!(
            "the HTTP entries ran past the entries' close ({:.0} s after the release): raise --lead-seconds",
            lead.as_secs_f64()
        ));
    }

    // 3. The rest, straight into the table: accepted elsewhere before the close, as a benchmark
    // loads them (`entered_at` no later than a second before the close).
    let bulk_n = n - m;
    let bar = progress(bulk_n as u64, "loaded");
    let started = Instant::now();
    let mut leaves: Vec<[u8; 32]> = Vec::with_capacity(n);
    leaves.extend(http_leaves.iter().flatten().filter_map(|l| hex::decode::<32>(l)));
    let mut loaded = 0;
    while loaded < bulk_n {
        let take = LOAD_CHUNK.min(bulk_n - loaded);
        let mut chunk = Vec::with_capacity(take);
        for i in loaded..loaded + take {
            let sub = bulk_user(run_id, i);
            let mut bytes = [0u8; 32];
            getrandom::fill(&mut bytes).map_err(|e| setup(&e))?;
            let key = EntryKey::from_bytes(bytes);
            leaves.push(key.leaf_bytes(&event_id));
            chunk.push(Entrant {
                user: UserId::parse(&sub).map_err(|e| setup(&e))?,
                email: Email::parse(&format!("{sub}@example.com")).map_err(|e| setup(&e))?,
                late: None,
                key: Some(key),
                receipt: None,
            });
        }
        let at = OffsetDateTime::now_utc().min(close - time::Duration::seconds(1));
        store.load_entries(&event_id, EntryShards::CURRENT, &chunk, at).await.map_err(|e| setup(&e))?;
        loaded += take;
        bar.inc(take as u64);
    }
    bar.finish_and_clear();
    let seconds = started.elapsed().as_secs_f64();
    report.bulk = BulkLoad {
        entries: bulk_n,
        seconds,
        entries_per_sec: bulk_n as f64 / seconds.max(1e-9),
        batch_write_items: bulk_n.div_ceil(25),
        how: "Store::load_entries: BatchWriteItem, 25 a call, 16 calls at once, unconditioned; not through HTTP",
    };
    snap("after the bulk load", &mut memory);

    // 4. Where the draw's read of the entries spends its time: one page of the same Query.
    report.query_probe = probe_query(&store, &event_id, n).await;
    if let Some(p) = &report.query_probe {
        eprintln!(
            "ballot-scale: one Query page of the entries: {} items in {:.2} s ({} pages, ~{:.0} s for the whole read)",
            p.items, p.seconds, p.pages_estimated, p.read_seconds_estimated
        );
    }

    // 5. The close, then the draw through the API.
    let left = close - OffsetDateTime::now_utc();
    report.waited_for_close_seconds = left.as_seconds_f64().max(0.0);
    if left.is_positive() {
        eprintln!("ballot-scale: waiting {:.0} s for the entries' close", left.as_seconds_f64());
        tokio::time::sleep(left.unsigned_abs() + Duration::from_millis(200)).await;
    }
    snap("before the draw", &mut memory);
    eprintln!("ballot-scale: drawing through the runner");
    let revealed = hex::encode(&secret);
    let drawing = Instant::now();
    let mut attempts = Vec::new();
    let (status, reply) = loop {
        let asking = Instant::now();
        let drawn = http
            .post(format!("{base}/admin/events/{event}/draw"))
            .bearer_auth(&users.admin)
            .json(&json!({ "secret": revealed }))
            .send()
            .await;
        let (status, reply) = match drawn {
            Ok(res) => {
                let status = res.status().as_u16();
                (status, res.json::<serde_json::Value>().await.unwrap_or_default())
            }
            Err(e) => (0, json!({ "transport": e.to_string() })),
        };
        let ms = asking.elapsed().as_secs_f64() * 1000.0;
        eprintln!("ballot-scale: the draw answered {status} in {ms:.0} ms");
        attempts.push((status, ms));
        if !matches!(status, 0 | 202 | 500..=599) || attempts.len() >= scale.draw_attempts.max(1) {
            break (status, reply);
        }
        // A 202 is a draw that goes on when asked again at once; a failure is waited out.
        if status != 202 {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    };
    report.draw = DrawPhase {
        status,
        ms: drawing.elapsed().as_secs_f64() * 1000.0,
        reply,
        attempts,
        source: "runner".into(),
        computed_ms: None,
    };
    snap("after the draw", &mut memory);
    report.runner_drew = status == 200;

    // 6. The product's own draw over the same leaves, here (what the release and query functions
    // compute after their reads: `draw::Compact`), timed, and the draw's structures sized.
    let before = Memory::own();
    let mut sorted = leaves.clone();
    sorted.sort_unstable();
    let computing = Instant::now();
    let compact = draw::Compact::draw(Algorithm::V2, sorted, &secret, &[]);
    let computed_ms = computing.elapsed().as_secs_f64() * 1000.0;
    let grown = Memory::own().zip(before).map_or(0.0, |(a, b)| a.rss_mib - b.rss_mib);
    report.sizes = Sizes::of(&compact, &http_entrants, run_id, bulk_n, computed_ms, grown);
    drop(http_entrants);
    eprintln!("ballot-scale: the compact draw computed here in {computed_ms:.0} ms");

    // 7. The published draw, page by page (the runner's), or made here from the compact draw.
    let token = users.tokens.first().map_or(users.admin.as_str(), String::as_str);
    let mut published = None;
    if report.runner_drew {
        match read_pages(&http, &base, &event, token).await {
            Ok((pages, publication)) => {
                report.publication = publication;
                let joining = Instant::now();
                let joined = Published::join(pages);
                report.verification.join_ms = joining.elapsed().as_secs_f64() * 1000.0;
                match joined {
                    Ok(p) => published = Some(p),
                    Err(e) => report.verification.detail = format!("the pages do not join: {e}"),
                }
            }
            Err(publication) => report.publication = publication,
        }
        snap("after the publication's reads", &mut memory);
    } else {
        report.notes.push(format!(
            "THE RUNNER DID NOT DRAW ({status} after {:.1} s and {} request(s): {}): the draw is computed here from the same leaves with \
             the product's draw::Compact, and its publication made as GET /draw pages it; their size and the verification \
             are measured, not read over HTTP, and no entrant's lookup is asked",
            report.draw.ms / 1000.0,
            report.draw.attempts.len(),
            report.draw.reply
        ));
        report.draw.source = "loadgen (the runner could not draw)".into();
        report.draw.computed_ms = Some(computed_ms);
        let order: Vec<String> =
            (0..compact.len()).filter_map(|p| compact.at(p)).map(|i| hex::encode(&compact.leaves()[i])).collect();
        let terms = Published {
            algorithm: Algorithm::V2.name().to_owned(),
            event_id: Some(event.clone()),
            commitment: draw::commitment(&secret),
            secret: hex::encode(&secret),
            root: hex::encode(&compact.root()),
            beacon: None,
            entrants: Vec::new(),
            entrant_count: Some(n as u64),
            from: None,
            next: None,
            order: Vec::new(),
            entries_close: Some(rfc3339(close)),
            drawn_at: Some(rfc3339(OffsetDateTime::now_utc())),
            capacity: Some(scale.tickets),
            admission_rate: None,
            receipt_keys: Vec::new(),
        };
        // Each page as GET /draw?from= gives it: the terms, from, next and its places.
        let mut publication = Publication { read_over_http: false, ..Publication::default() };
        let mut from = 0;
        loop {
            let (_, to, next) = draw::page_bounds(from, order.len());
            let page = Published {
                from: Some(from as u64),
                next: next.map(|x| x as u64),
                order: order[from..to].to_vec(),
                ..terms.clone()
            };
            publication.bytes += serde_json::to_vec(&page).map_or(0, |b| b.len() as u64);
            publication.pages += 1;
            match next {
                Some(next) => from = next,
                None => break,
            }
        }
        report.publication = publication;
        published = Some(Published { order, ..terms });
        snap("after the publication made here", &mut memory);
    }
    report.publication.bytes_per_entrant = report.publication.bytes as f64 / n as f64;

    // 8. The whole draw recomputed, as an auditor would, and written out.
    if let Some(published) = &published {
        let verifying = Instant::now();
        let verified = published.verify();
        report.verification.verify_ms = verifying.elapsed().as_secs_f64() * 1000.0;
        let mut ours = leaves.clone();
        ours.sort_unstable();
        let mut listed: Vec<[u8; 32]> = published.order.iter().filter_map(|l| hex::decode::<32>(l)).collect();
        listed.sort_unstable();
        report.verification.leaves_are_ours = listed == ours && listed.len() == n;
        let same_root = published.root == hex::encode(&compact.root());
        report.verification.holds = verified.is_ok()
            && same_root
            && published.algorithm() == Ok(Algorithm::V2)
            && published.event_id.as_deref() == Some(event.as_str())
            && published.entrant_count == Some(n as u64);
        report.verification.detail = match verified {
            Ok(()) => format!(
                "{} entrants, root {}{}; {} of the draw's leaves are the entrants' ({} ours)",
                published.order.len(),
                published.root,
                if same_root { "" } else { " (NOT the root of the compact draw made here)" },
                if report.verification.leaves_are_ours { "all" } else { "NOT all" },
                ours.len()
            ),
            Err(fault) => fault.to_string(),
        };
        snap("after the verification", &mut memory);
        if let Some(path) = &scale.draw_out {
            let text = serde_json::to_string(published).map_err(|e| setup(&e))?;
            report.publication.file_bytes = text.len() as u64;
            std::fs::write(path, text).map_err(|e| RunError::Setup(format!("{}: {e}", path.display())))?;
        }
    }

    // 9. One HTTP entrant's place and proof.
    if report.runner_drew
        && let Some(published) = &published
        && let Some((user, leaf)) = http_leaves.iter().enumerate().find_map(|(u, l)| Some((u, l.clone()?)))
    {
        let asking = Instant::now();
        let answer = api.entry(&users.tokens[user], &event).await;
        let mut lookup =
            Lookup { status: answer.status, ms: asking.elapsed().as_secs_f64() * 1000.0, ..Lookup::default() };
        let proof: Option<Vec<ProofStep>> = serde_json::from_value(answer.body["proof"].clone()).ok();
        lookup.draw_position = answer.body["draw_position"].as_u64();
        lookup.proof_steps = proof.as_ref().map_or(0, Vec::len);
        let place = published.order.iter().position(|l| *l == leaf).map(|i| i as u64 + 1);
        lookup.proven = answer.status == 200
            && lookup.draw_position.is_some()
            && lookup.draw_position == place
            && answer.body["leaf"].as_str() == Some(leaf.as_str())
            && answer.body["root"].as_str() == Some(published.root.as_str())
            && proof.is_some_and(|p| draw::proves(Algorithm::V2, &leaf, &p, &published.root));
        report.lookup = Some(lookup);
        snap("after the entry lookup", &mut memory);
    }

    report.memory = memory;
    report.total_seconds = origin.elapsed().as_secs_f64();
    // What was measured checks out; a runner that could not draw is the report's to say (its
    // note), not a failure of the checks: at a million the emulator's read cannot be done in the
    // function's time.
    report.passed = report.http_entries.accepted == m
        && report.verification.holds
        && report.verification.leaves_are_ours
        && (!report.runner_drew
            || (report.publication.read_over_http
                && report.publication.failure.is_none()
                && report.lookup.as_ref().is_some_and(|l| l.proven)));
    Ok(report)
}

/// A bulk-loaded entrant's user id.
fn bulk_user(run_id: &str, i: usize) -> String {
    format!("bs-{run_id}-b{i}")
}

/// What glibc's allocator takes for `n` bytes on a 64-bit machine: `n` and its 8-byte header
/// rounded up to 16, at least 32 (none for an empty string).
fn chunk(n: usize) -> usize {
    if n == 0 { 0 } else { (n + 8).div_ceil(16).max(2) * 16 }
}

const MIB: f64 = 1024.0 * 1024.0;

/// The structures a draw of this many entrants holds, sized from their types (the vectors at
/// their length, each string's allocation as glibc makes it), and the compact draw made here.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Sizes {
    pub entrants: usize,
    /// The draw's roll as the release and query functions read it (`Store::roll`): a
    /// `RollEntry` each, its leaf and its user id.
    pub read_mib: f64,
    /// The same built here as the read builds it (pushed one by one), after the rest: loadgen's
    /// resident growth holding it.
    pub read_rss_mib: f64,
    /// The compact draw: every level of the tree (32 bytes a node), the order and its inverse
    /// (4 bytes each a place).
    pub compact_mib: f64,
    /// The users in entrant order, beside the compact draw until the places laid down are taken
    /// from them.
    pub users_mib: f64,
    /// What the query function keeps for a drawn event: the compact draw (and the users of the
    /// places laid down, a few thousand).
    pub kept_mib: f64,
    /// `draw::Compact::draw` over the sorted leaves, here: its time, and loadgen's resident growth
    /// holding it and its leaves (its vectors are fresh mappings: a measure of `compact_mib`).
    pub compact_draw_ms: f64,
    pub compact_draw_rss_mib: f64,
}

impl Sizes {
    fn of(
        compact: &draw::Compact,
        http: &[(String, String)],
        run_id: &str,
        bulk: usize,
        compact_draw_ms: f64,
        compact_draw_rss_mib: f64,
    ) -> Self {
        let n = compact.len();
        let mut users = 0usize;
        for (user, _) in http {
            users += chunk(user.len());
        }
        for i in 0..bulk {
            users += chunk(bulk_user(run_id, i).len());
        }
        let string = std::mem::size_of::<String>();
        // The tree's levels: n leaves, then each level half the one below, rounded up.
        let (mut nodes, mut level) = (0usize, n);
        while level > 1 {
            nodes += level;
            level = level.div_ceil(2);
        }
        nodes += level;
        let compact_bytes = nodes * 32 + n * 8;
        let users_bytes = n * string + users;
        // The roll's read, built: the users as loaded, a leaf each (any: its size is the same).
        let before = Memory::own();
        let mut read = Vec::new();
        let entry = |user: &str| Some(RollEntry { leaf: [7; 32], user: UserId::parse(user).ok()? });
        read.extend(http.iter().filter_map(|(u, _)| entry(u)));
        for i in 0..bulk {
            read.extend(entry(&bulk_user(run_id, i)));
        }
        let read_rss_mib = Memory::own().zip(before).map_or(0.0, |(a, b)| a.rss_mib - b.rss_mib);
        drop(read);
        Self {
            read_rss_mib,
            entrants: n,
            read_mib: (n * std::mem::size_of::<RollEntry>() + users) as f64 / MIB,
            compact_mib: compact_bytes as f64 / MIB,
            users_mib: users_bytes as f64 / MIB,
            kept_mib: compact_bytes as f64 / MIB,
            compact_draw_ms,
            compact_draw_rss_mib,
        }
    }
}

/// One page of one shard of the event's entries as the draw's read asks for it
/// (`Store::shard_entrants`: its three attributes, consistent), timed: the emulator's cost of each
/// of the read's pages at this size.
async fn probe_query(store: &Store, event: &EventId, n: usize) -> Option<QueryProbe> {
    let started = Instant::now();
    let shards = EntryShards::CURRENT;
    let out = store
        .entries_query(event, shards, 0)
        .expression_attribute_names("#late", "late")
        .projection_expression("user_id, entry_key, #late")
        .consistent_read(true)
        .send()
        .await;
    let seconds = started.elapsed().as_secs_f64();
    match out {
        Ok(out) => {
            let items = out.items.map_or(0, |i| i.len()).max(1);
            let pages = n.div_ceil(shards.get() as usize).div_ceil(items) * shards.get() as usize;
            Some(QueryProbe { items, seconds, pages_estimated: pages, read_seconds_estimated: seconds * pages as f64 })
        }
        Err(e) => {
            eprintln!(
                "ballot-scale: the probe's Query failed after {seconds:.1} s: {}",
                aws_sdk_dynamodb::error::DisplayErrorContext(e)
            );
            None
        }
    }
}

/// Every page of `GET /events/{id}/draw?from=`, following `next`: each timed and sized, 429s
/// waited out as `Retry-After` says, a 5xx asked again a second later.
async fn read_pages(
    http: &reqwest::Client,
    base: &str,
    event: &str,
    token: &str,
) -> Result<(Vec<Published>, Publication), Publication> {
    let mut publication = Publication { read_over_http: true, ..Publication::default() };
    let mut pages = Vec::new();
    let mut others = Vec::new();
    let mut from = 0u64;
    let started = Instant::now();
    let bar = progress(0, "pages");
    loop {
        let (mut tries, mut failures) = (0, 0);
        let (body, took) = loop {
            tries += 1;
            let asking = Instant::now();
            let sent = http
                .get(format!("{base}/events/{event}/draw"))
                .query(&[("from", from)])
                .bearer_auth(token)
                .send()
                .await;
            let fail = |why: String, mut publication: Publication| {
                publication.seconds = started.elapsed().as_secs_f64();
                publication.failure = Some(why);
                publication
            };
            let res = match sent {
                Ok(res) => res,
                Err(e) if tries < PAGE_TRIES && failures + 1 < PAGE_FAILURES => {
                    eprintln!("ballot-scale: the page from {from}: {e}; asking again");
                    failures += 1;
                    publication.failed_5xx += 1;
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
                Err(e) => return Err(fail(format!("the page from {from}: {e}"), publication)),
            };
            let status = res.status().as_u16();
            let wait = res
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok())
                .map(Duration::from_secs);
            let bytes = match res.bytes().await {
                Ok(b) => b,
                Err(e) => return Err(fail(format!("the page from {from}: {e}"), publication)),
            };
            let took = asking.elapsed();
            match status {
                200 => {
                    publication.bytes += bytes.len() as u64;
                    break (bytes, took);
                }
                429 if tries < PAGE_TRIES => {
                    publication.throttled_429 += 1;
                    tokio::time::sleep(wait.unwrap_or(Duration::from_secs(1))).await;
                }
                500..=599 if tries < PAGE_TRIES && failures + 1 < PAGE_FAILURES => {
                    failures += 1;
                    publication.failed_5xx += 1;
                    eprintln!(
                        "ballot-scale: the page from {from} answered {status} after {:.1} s; asking again",
                        took.as_secs_f64()
                    );
                    tokio::time::sleep(wait.unwrap_or(Duration::from_secs(1))).await;
                }
                _ => {
                    publication.failed_5xx += usize::from(status >= 500);
                    let text = String::from_utf8_lossy(&bytes).chars().take(300).collect::<String>();
                    return Err(fail(format!("the page from {from} answered {status}: {text}"), publication));
                }
            }
        };
        if pages.is_empty() {
            publication.first_page_ms = took.as_secs_f64() * 1000.0;
        } else {
            others.push(took);
        }
        let page: Published = match serde_json::from_slice(&body) {
            Ok(p) => p,
            Err(e) => {
                publication.failure = Some(format!("the page from {from}: {e}"));
                return Err(publication);
            }
        };
        if let Some(count) = page.entrant_count
            && pages.is_empty()
        {
            bar.set_length(count.div_ceil(PAGE_PLACES as u64));
        }
        let next = page.next;
        pages.push(page);
        bar.inc(1);
        match next {
            None => break,
            Some(next) if next > from && pages.len() < MAX_PAGES => from = next,
            Some(next) => {
                publication.failure = Some(format!("the page from {from} names {next} next"));
                return Err(publication);
            }
        }
    }
    bar.finish_and_clear();
    publication.pages = pages.len();
    publication.seconds = started.elapsed().as_secs_f64();
    publication.other_pages = Latency::of(&others);
    Ok((pages, publication))
}

fn memory_line(s: &Snapshot) -> String {
    let one = |name: &str, m: &Option<Memory>| {
        m.map(|m| format!("{name} {:.0} MiB (peak {:.0})", m.rss_mib, m.peak_mib)).unwrap_or_default()
    };
    [one("runner", &s.runner), one("emulator", &s.emulator), one("loadgen", &s.loadgen)]
        .into_iter()
        .filter(|x| !x.is_empty())
        .collect::<Vec<_>>()
        .join(", ")
}

impl ScaleReport {
    pub fn render(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let e = &self.http_entries;
        let b = &self.bulk;
        let p = &self.publication;
        let v = &self.verification;
        let _ = writeln!(
            out,
            "ballot-scale: {} entrants for {} tickets, event {} ({})",
            self.entrants, self.tickets, self.event_id, self.base_url
        );
        let _ = writeln!(out, "  entries close {:.0} s after the release", self.lead_seconds);
        let _ = writeln!(
            out,
            "  through the runner (HTTP, {} at once): {} of {} accepted in {:.1} s: {:.0} entries/s; latency {}",
            self.concurrency,
            e.accepted,
            e.users,
            e.seconds,
            e.entries_per_sec,
            latency_line(&e.latency)
        );
        let _ = writeln!(out, "    outcomes {:?}; retried {:?}", e.outcomes, e.retried);
        let _ = writeln!(
            out,
            "  loaded straight into the table (NOT through HTTP): {} entries in {:.1} s: {:.0} entries/s ({} BatchWriteItem calls)",
            b.entries, b.seconds, b.entries_per_sec, b.batch_write_items
        );
        let _ = writeln!(
            out,
            "    why: through HTTP each entry is a TransactWriteItems, and the emulator's ~1,100 a second would take a quarter \
             of an hour for a million; these skip the entry route (its checks, its receipt) and are unconditioned"
        );
        if let Some(q) = &self.query_probe {
            let _ = writeln!(
                out,
                "  one Query page of the entries (the draw's read, on the emulator): {} items in {:.2} s; the whole read: {} pages, ~{:.0} s",
                q.items, q.seconds, q.pages_estimated, q.read_seconds_estimated
            );
        }
        if self.waited_for_close_seconds > 0.0 {
            let _ = writeln!(out, "  waited {:.0} s for the entries' close", self.waited_for_close_seconds);
        }
        let d = &self.draw;
        let tries: Vec<String> = d.attempts.iter().map(|(s, ms)| format!("{s} in {:.1} s", ms / 1000.0)).collect();
        let _ = writeln!(
            out,
            "  draw (POST /admin/events/{{id}}/draw): {} after {:.1} s, {} request(s): {}; {}",
            d.status,
            d.ms / 1000.0,
            d.attempts.len(),
            tries.join(", "),
            d.reply
        );
        if !self.runner_drew {
            let _ = writeln!(
                out,
                "  THE RUNNER DID NOT DRAW: what follows is the draw computed in loadgen (draw::Compact, the product's code)"
            );
        }
        let z = &self.sizes;
        let _ = writeln!(
            out,
            "  the compact draw (draw::Compact::draw over {} sorted leaves) here: {:.0} ms, loadgen +{:.0} MiB resident with its leaves",
            z.entrants, z.compact_draw_ms, z.compact_draw_rss_mib
        );
        let _ = writeln!(
            out,
            "  the draw's structures at {} entrants, from their types: the roll as read {:.0} MiB (built here: +{:.0} MiB \
             resident); the compact draw {:.0} MiB; users in entrant order {:.0} MiB; kept by the query function \
             (the compact draw) {:.0} MiB",
            z.entrants, z.read_mib, z.read_rss_mib, z.compact_mib, z.users_mib, z.kept_mib
        );
        if p.read_over_http {
            let _ = writeln!(
                out,
                "  publication (GET /events/{{id}}/draw?from=): {} pages, {} bytes ({:.1} bytes an entrant) in {:.1} s; \
                 first page {:.0} ms, the others {}; {} x 429, {} x 5xx{}",
                p.pages,
                p.bytes,
                p.bytes_per_entrant,
                p.seconds,
                p.first_page_ms,
                latency_line(&p.other_pages),
                p.throttled_429,
                p.failed_5xx,
                p.failure.as_ref().map(|f| format!("; FAILED: {f}")).unwrap_or_default()
            );
        } else {
            let _ = writeln!(
                out,
                "  publication, sized from the computed draw's pages (not read over HTTP): {} pages, {} bytes ({:.1} bytes an entrant)",
                p.pages, p.bytes, p.bytes_per_entrant
            );
        }
        let _ = writeln!(
            out,
            "  verification (join {:.0} ms, recompute {:.0} ms): {}: {}",
            v.join_ms,
            v.verify_ms,
            if v.holds { "holds" } else { "DOES NOT HOLD" },
            v.detail
        );
        if p.file_bytes > 0 {
            let _ = writeln!(out, "  the whole draw written: {} bytes", p.file_bytes);
        }
        if let Some(l) = &self.lookup {
            let _ = writeln!(
                out,
                "  one entrant's GET /events/{{id}}/entry: {} in {:.0} ms, place {:?}, {} proof steps: {}",
                l.status,
                l.ms,
                l.draw_position,
                l.proof_steps,
                if l.proven { "the place and the proof to the root check" } else { "DOES NOT CHECK" }
            );
        }
        let _ = writeln!(out, "  memory:");
        for s in &self.memory {
            let _ = writeln!(out, "    {:>6.0} s  {:<32} {}", s.after_s, s.at, memory_line(s));
        }
        for note in &self.notes {
            let _ = writeln!(out, "  note: {note}");
        }
        let verdict = match (self.passed, self.runner_drew) {
            (true, true) => "PASSED",
            (true, false) => "PASSED the checks it could make (the runner did not draw)",
            (false, _) => "FAILED",
        };
        let _ = writeln!(out, "  total {:.0} s; {verdict}", self.total_seconds);
        out
    }
}

fn latency_line(l: &Latency) -> String {
    format!("p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (n={})", l.p50_ms, l.p99_ms, l.max_ms, l.count)
}
