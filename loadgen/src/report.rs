//! What a run measured and what it checked, printed for people and written as JSON.

use std::{collections::BTreeMap, fmt::Write, time::Duration};

use serde::Serialize;

/// Latency percentiles (nearest rank) of a set of requests, in milliseconds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Latency {
    pub count: usize,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    pub fn of(samples: &[Duration]) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
        ms.sort_by(f64::total_cmp);
        let rank = |p: f64| ms[((p * ms.len() as f64).ceil() as usize).clamp(1, ms.len()) - 1];
        Self { count: ms.len(), p50_ms: rank(0.50), p95_ms: rank(0.95), p99_ms: rank(0.99), max_ms: rank(1.0) }
    }

    fn line(&self) -> String {
        format!(
            "n={:<6} p50 {:>8.2} ms  p95 {:>8.2} ms  p99 {:>8.2} ms  max {:>8.2} ms",
            self.count, self.p50_ms, self.p95_ms, self.p99_ms, self.max_ms
        )
    }
}

/// One invariant and whether the run kept it.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub pass: bool,
    pub detail: String,
}

impl Check {
    pub fn new(name: &'static str, pass: bool, detail: impl Into<String>) -> Self {
        Self { name, pass, detail: detail.into() }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct HashPhase {
    pub requests: usize,
    pub seconds: f64,
    pub latency: Latency,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct GrabPhase {
    /// Grab requests sent, retries included.
    pub requests: usize,
    /// From the first grab sent to the last reply.
    pub seconds: f64,
    pub grabs_per_sec: f64,
    /// Every request, then winners' (202) and refused (409 SOLD_OUT) apart.
    pub latency: Latency,
    pub latency_won: Latency,
    pub latency_refused: Latency,
    /// Each user's last answer, by `status CODE`.
    pub outcomes: BTreeMap<String, usize>,
    /// Answers that were retried (503, 429, a sale opening a moment later), by `status CODE`.
    pub retried: BTreeMap<String, usize>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Confirmation {
    pub winners: usize,
    pub confirmed: usize,
    pub rejected: usize,
    pub mailed: usize,
    /// From the first grab to the last order `CONFIRMED` / the last confirmation mail, by the
    /// orders' own timestamps.
    pub last_confirmed_after_s: Option<f64>,
    pub last_mail_after_s: Option<f64>,
    /// With `--hold-mail`: when the mail consumer was resumed, after the first grab (the last
    /// grab reply).
    pub mail_held_until_s: Option<f64>,
    /// How long the run waited for the queue to drain after the last grab reply.
    pub waited_s: f64,
    pub polls: usize,
}

/// A paced opening (`--rate`): the users started per second asked for, and what came: the users'
/// first requests (verify-hash per user, else the grab) spread over `spread_s` seconds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Pacing {
    pub target_users_per_s: f64,
    pub achieved_users_per_s: f64,
    pub spread_s: f64,
}

/// A fanned-out run (`--fan-out`): the load workers that ran the rush, each a slice of the users.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FanOutPhase {
    /// The worker function invoked, and how many times at once.
    pub function: String,
    pub workers: usize,
    pub smallest_slice: usize,
    pub largest_slice: usize,
    /// The opening every worker was told to start at (RFC 3339).
    pub opening: String,
    /// The last worker's start after that opening (0 when every worker was there in time): a
    /// cold start or a slow invocation shows here first.
    pub latest_start_ms: f64,
    /// The first worker's start after the opening.
    pub earliest_start_ms: f64,
    /// From the driver's invocations to the last worker's answer.
    pub invoked_s: f64,
}

/// A ballot's phases: the entries and the draw.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BallotPhase {
    /// `ballot` or `fair_open`.
    pub sale_mode: &'static str,
    /// Entry (or queue) requests, duplicates included, and how long they took.
    pub entries: usize,
    pub seconds: f64,
    pub latency: Latency,
    /// Each entry request's last answer, by `status CODE`.
    pub outcomes: BTreeMap<String, usize>,
    /// The organiser's draw request, from asking to the answer.
    pub draw_ms: f64,
    /// With a proof of work: its bits, and each user's solve as these clients ran them (many at
    /// once on this machine's cores: wall time, waits included).
    pub work_bits: Option<u32>,
    pub work_solve: Latency,
    pub entrants: usize,
    pub winners: usize,
    pub waiting: usize,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub scenario: String,
    pub base_url: String,
    pub event_id: String,
    pub users: usize,
    pub tickets: u32,
    pub concurrency: usize,
    pub started_at: String,
    pub hashes: HashPhase,
    pub grabs: GrabPhase,
    pub confirmation: Confirmation,
    /// A ballot's run (then `hashes` and `grabs` stay empty).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ballot: Option<BallotPhase>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pacing: Option<Pacing>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fan_out: Option<FanOutPhase>,
    pub checks: Vec<Check>,
    pub passed: bool,
    /// Every grab request and every order's confirmation and mail, in time: the chart's input
    /// (not in the JSON: a red packet has 30,000 requests).
    #[serde(skip)]
    pub timeline: crate::chart::Timeline,
}

impl Report {
    pub fn render(&self) -> String {
        let mut out = String::new();
        let g = &self.grabs;
        let c = &self.confirmation;
        let secs = |v: Option<f64>| v.map_or("-".to_owned(), |s| format!("{s:.2} s"));
        let _ = writeln!(
            out,
            "loadgen {}: {} users, {} tickets, concurrency {}, {} (event {})",
            self.scenario, self.users, self.tickets, self.concurrency, self.base_url, self.event_id
        );
        if let Some(b) = &self.ballot {
            let outcomes: Vec<String> = b.outcomes.iter().map(|(k, v)| format!("{v} x {k}")).collect();
            let what = if b.sale_mode == "ballot" { "entries" } else { "queue  " };
            let _ = writeln!(out, "  {what}       {} requests in {:.2} s   {}", b.entries, b.seconds, b.latency.line());
            let _ = writeln!(out, "    outcomes    {}", outcomes.join(", "));
            if let Some(bits) = b.work_bits {
                let _ = writeln!(out, "    work        {bits} bits a user, solved here: {}", b.work_solve.line());
            }
            let _ = writeln!(
                out,
                "  draw          {:.0} ms: {} entrants, the first {} to win, {} after them",
                b.draw_ms, b.entrants, b.winners, b.waiting
            );
            let _ = writeln!(
                out,
                "  orders        {} winners: {} confirmed, {} rejected, {} mailed (last mail {} after the draw)",
                c.winners,
                c.confirmed,
                c.rejected,
                c.mailed,
                secs(c.last_mail_after_s)
            );
            self.render_checks(&mut out);
            return out;
        }
        if let Some(f) = &self.fan_out {
            let _ = writeln!(
                out,
                "  fan-out       {} workers of {} ({}-{} users each), opening {}: started {:.0}-{:.0} ms after it; answered {:.2} s after the invocations",
                f.workers,
                f.function,
                f.smallest_slice,
                f.largest_slice,
                f.opening,
                f.earliest_start_ms,
                f.latest_start_ms,
                f.invoked_s
            );
        }
        if let Some(p) = &self.pacing {
            let _ = writeln!(
                out,
                "  pacing        {:.0} users/s asked, {:.0} users/s came (their first requests over {:.2} s)",
                p.target_users_per_s, p.achieved_users_per_s, p.spread_s
            );
        }
        let _ = writeln!(
            out,
            "  verify-hash   {} requests in {:.2} s   {}",
            self.hashes.requests,
            self.hashes.seconds,
            self.hashes.latency.line()
        );
        let _ = writeln!(
            out,
            "  grab          {} requests in {:.2} s = {:.0} grabs/s",
            g.requests, g.seconds, g.grabs_per_sec
        );
        let _ = writeln!(out, "    all         {}", g.latency.line());
        let _ = writeln!(out, "    won (202)   {}", g.latency_won.line());
        let _ = writeln!(out, "    refused     {}", g.latency_refused.line());
        let outcomes: Vec<String> = g.outcomes.iter().map(|(k, v)| format!("{v} x {k}")).collect();
        let _ = writeln!(out, "    outcomes    {}", outcomes.join(", "));
        if !g.retried.is_empty() {
            let retried: Vec<String> = g.retried.iter().map(|(k, v)| format!("{v} x {k}")).collect();
            let _ = writeln!(out, "    retried     {}", retried.join(", "));
        }
        let _ = writeln!(
            out,
            "  after the first grab: last reply {:.2} s, last CONFIRMED {}, last mail {}",
            g.seconds,
            secs(c.last_confirmed_after_s),
            secs(c.last_mail_after_s)
        );
        if let Some(held) = c.mail_held_until_s {
            let since = |v: Option<f64>| v.map_or("-".to_owned(), |s| format!("{:.2} s", s - held));
            let _ = writeln!(
                out,
                "  the mail consumer held until the last reply; after it resumed: last CONFIRMED {}, last mail {}",
                since(c.last_confirmed_after_s),
                since(c.last_mail_after_s)
            );
        }
        let _ = writeln!(
            out,
            "  orders        {} winners: {} confirmed, {} rejected, {} mailed (waited {:.1} s, {} polls)",
            c.winners, c.confirmed, c.rejected, c.mailed, c.waited_s, c.polls
        );
        self.render_checks(&mut out);
        out
    }

    fn render_checks(&self, out: &mut String) {
        let _ = writeln!(out, "  invariants (docs/DESIGN.md section 13, over HTTP):");
        for check in &self.checks {
            let _ =
                writeln!(out, "    [{}] {}: {}", if check.pass { "pass" } else { "FAIL" }, check.name, check.detail);
        }
        let _ = writeln!(out, "  {}", if self.passed { "every check passed" } else { "SOME CHECKS FAILED" });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let l = Latency::of(&samples);
        assert_eq!((l.count, l.p50_ms, l.p95_ms, l.p99_ms, l.max_ms), (100, 50.0, 95.0, 99.0, 100.0));
        let one = Latency::of(&[Duration::from_millis(7)]);
        assert_eq!((one.p50_ms, one.p99_ms), (7.0, 7.0));
        assert_eq!(Latency::of(&[]).count, 0);
    }
}
