//! A warm fleet at the open: how many environments of grab and verify-hash to keep provisioned
//! around a sale's start, sized from the rate its organiser expects, and what the deployment's and
//! the account's limits say about that rate (docs/DESIGN.md section 12). Pure: the figures in, the
//! fleet and the warnings out; `crate::fleet` reads the limits and applies the fleet.

use serde::Serialize;
use time::{Duration, OffsetDateTime};

use super::Event;

/// The fleet is asked for this long before `sale_start`: provisioned concurrency takes minutes
/// to become ready, and the first grabs come before the second. No longer: an environment connects
/// to the cache in its init and then sits frozen until the open, and a frozen environment's
/// connections are reported dead after 7-10 minutes (the server's keepalive gives up on a peer
/// that does not answer; a path's idle timeout), so one found dead at the open connects again
/// there, its TLS handshake on every master (docs/SCALE.md: a tenth of the hot event's fleet
/// doing so costs each master 3.5 s of its core). Reconcile's minute and the fleet's provisioning
/// ([`PROVISIONED_PER_MINUTE`]) fit within it for up to [`READY_WITHIN_LEAD`] environments.
pub const LEAD: Duration = Duration::minutes(5);
/// The longest a frozen environment's connection is taken to live: below the 7 minutes after
/// which public reports find it dead.
pub const CONNECTION_OUTLIVES_A_FREEZE_OF: Duration = Duration::minutes(6);
const _: () = assert!(LEAD.whole_seconds() <= CONNECTION_OUTLIVES_A_FREEZE_OF.whole_seconds());
/// Environments a function's provisioned concurrency readies a minute, taken as Lambda's scaling
/// rate ("Lambda scaling behavior": 1,000 new environments per function every 10 s).
pub const PROVISIONED_PER_MINUTE: u32 = 6_000;
/// The most environments per function provisioned within the lead, after reconcile's first
/// minute: a larger fleet's last environments are ready only after the open
/// (`FLEET_READY_LATE`).
pub const READY_WITHIN_LEAD: u32 = PROVISIONED_PER_MINUTE * (LEAD.whole_minutes() as u32 - 1);
/// ... and kept this long after it: the crowd of an open thins within a minute or two.
pub const TAIL: Duration = Duration::minutes(5);
/// Seconds a grab holds its environment, a winner's `SendMessage` included (docs/SCALE.md's
/// durations: 1.5 ms, and 10 ms more for a winner).
pub const GRAB_SECONDS: f64 = 0.012;
/// Seconds a verify-hash call holds its environment (docs/SCALE.md).
pub const VERIFY_HASH_SECONDS: f64 = 0.002;
/// Environments beyond Little's law's mean: arrivals come in bursts.
pub const HEADROOM: f64 = 2.0;
/// Requests a second one execution environment serves at most, however short each ("Lambda
/// scaling behavior": up to 10 requests a second per environment). For calls of milliseconds this,
/// not their duration, sizes the fleet.
pub const REQUESTS_PER_ENVIRONMENT: u32 = 10;
/// Grab's fleet beyond verify-hash's: besides every hash's grab it serves the grabs' own retries
/// (docs/SCALE.md's model: at equal sizes those find grab full and come back again).
pub const GRAB_RETRY_ROOM: f64 = 1.2;
/// Concurrency Lambda keeps unreserved in every account: no function may be given it.
pub const UNRESERVED_MINIMUM: u32 = 100;
/// API Gateway's default rate per account and Region (requests/s), which no API reads.
pub const API_ACCOUNT_RATE: u32 = 10_000;
/// CloudFront's requests a second per distribution by default ("Quotas", Amazon CloudFront), which
/// no API of the stack's reads.
pub const EDGE_DISTRIBUTION_RATE: u32 = 250_000;
/// Requests a user's grab costs the edge: verify-hash and the grab, each after a read of the sale's
/// state (docs/DEPLOY.md, "The edge": a client reads it before it asks).
pub const EDGE_REQUESTS_PER_GRAB: u32 = 4;
/// Grabs a second one bucket grants on its own master of the cache as deployed (Valkey 8.0, TLS,
/// cluster mode, two replicas), beside its share of the users' verify-hash: docs/SCALE.md's model
/// grants 88,573 on twelve buckets, 110,864 on fourteen, 130,208 on sixteen at 120,000 users a
/// second (`open_sim`'s test holds each above this per bucket).
pub const GRANTS_PER_BUCKET: u32 = 7_250;
/// A sale's confirmations should all be sent within this.
pub const MAIL_DRAIN: Duration = Duration::minutes(10);

/// Environments kept provisioned for each of the two functions an open hits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct FleetSize {
    pub grab: u32,
    pub verify_hash: u32,
}

/// Environments for `rate` calls per second each holding one for `seconds`: Little's law with
/// [`HEADROOM`], or [`REQUESTS_PER_ENVIRONMENT`]'s bound, the larger; times `room`.
fn environments(rate: u32, seconds: f64, room: f64) -> u32 {
    let by_duration = f64::from(rate) * seconds * HEADROOM;
    let by_requests = f64::from(rate) / f64::from(REQUESTS_PER_ENVIRONMENT);
    (by_duration.max(by_requests) * room).ceil() as u32
}

impl FleetSize {
    /// The fleet for an open of `rate` grabs per second: every grab asks verify-hash first, so
    /// both see the same rate.
    pub fn for_rate(rate: u32) -> Self {
        Self {
            grab: environments(rate, GRAB_SECONDS, GRAB_RETRY_ROOM),
            verify_hash: environments(rate, VERIFY_HASH_SECONDS, 1.0),
        }
    }

    /// No more than each function may run (its reserved concurrency, where it has one).
    pub fn capped(self, limits: &DeploymentLimits) -> Self {
        let cap = |n: u32, reserved: Option<u32>| reserved.map_or(n, |r| n.min(r));
        Self {
            grab: cap(self.grab, limits.grab_reserved),
            verify_hash: cap(self.verify_hash, limits.verify_hash_reserved),
        }
    }

    pub fn total(self) -> u32 {
        self.grab.saturating_add(self.verify_hash)
    }

    fn add(self, other: Self) -> Self {
        Self {
            grab: self.grab.saturating_add(other.grab),
            verify_hash: self.verify_hash.saturating_add(other.verify_hash),
        }
    }
}

/// One event's warm fleet: its size and when it is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct WarmFleet {
    #[serde(with = "time::serde::rfc3339")]
    pub from: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub until: OffsetDateTime,
    #[serde(flatten)]
    pub size: FleetSize,
}

impl WarmFleet {
    /// The event's fleet, when its organiser named a rate.
    pub fn of(event: &Event, limits: &DeploymentLimits) -> Option<Self> {
        let rate = event.expected_rate?;
        Some(Self {
            from: event.sale_start - LEAD,
            until: event.sale_start + TAIL,
            size: FleetSize::for_rate(rate).capped(limits),
        })
    }

    fn covers(&self, now: OffsetDateTime) -> bool {
        self.from <= now && now < self.until
    }
}

/// The fleet wanted at `now`: the sum of every event's whose window holds it (opens that overlap
/// add up), within each function's reserved concurrency. Zero outside every window: the fleet is
/// removed.
pub fn wanted<'a>(
    events: impl IntoIterator<Item = &'a Event>,
    now: OffsetDateTime,
    limits: &DeploymentLimits,
) -> FleetSize {
    events
        .into_iter()
        .filter_map(|e| WarmFleet::of(e, limits))
        .filter(|f| f.covers(now))
        .fold(FleetSize::default(), |sum, f| sum.add(f.size))
        .capped(limits)
}

/// The events whose warm fleet `now` falls in ([`wanted`]'s), with how long until the last window
/// of them closes.
pub fn warming<'a>(
    events: impl IntoIterator<Item = &'a Event>,
    now: OffsetDateTime,
    limits: &DeploymentLimits,
) -> (Vec<&'a crate::EventId>, std::time::Duration) {
    let mut until = now;
    let ids = events
        .into_iter()
        .filter(|e| WarmFleet::of(e, limits).is_some_and(|f| f.covers(now)))
        .inspect(|e| until = until.max(e.sale_start + TAIL))
        .map(|e| &e.id)
        .collect();
    (ids, std::time::Duration::try_from(until - now).unwrap_or_default())
}

/// The deployment's own limits, as the template set them (`None`: no limit set).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeploymentLimits {
    /// Requests/s of the grab route, of verify-hash's, and of the whole stage.
    pub grab_route: Option<u32>,
    pub verify_hash_route: Option<u32>,
    pub stage: Option<u32>,
    /// Reserved concurrency of grab and verify-hash.
    pub grab_reserved: Option<u32>,
    pub verify_hash_reserved: Option<u32>,
    /// A CloudFront distribution stands in front of the API (`Edge=cloudfront`).
    pub edge: bool,
}

/// What the account says, read at release (`None`: it could not be read).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct AccountLimits {
    /// Lambda's concurrent executions for the account and Region.
    pub concurrency: Option<u32>,
    /// SES's sending rate, mails per second.
    pub mail_rate: Option<f64>,
    /// Whether SES may send to any address (`false`: the sandbox).
    pub mail_production: Option<bool>,
}

/// Something to raise before the open, with what to raise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Warning {
    pub code: &'static str,
    pub detail: String,
}

/// The release's warning codes: the source of openapi.yaml's `FleetWarning.code` enum (`cargo
/// xtask gen`).
macro_rules! warning_codes {
    ($($code:ident => $text:literal,)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum WarningCode { $($code),* }

        impl WarningCode {
            pub const ALL: &[WarningCode] = &[$(WarningCode::$code),*];

            pub fn as_str(self) -> &'static str {
                match self { $(WarningCode::$code => $text),* }
            }
        }
    };
}

warning_codes! {
    GrabRouteThrottle => "GRAB_ROUTE_THROTTLE",
    VerifyHashRouteThrottle => "VERIFY_HASH_ROUTE_THROTTLE",
    StageThrottle => "STAGE_THROTTLE",
    ApiAccountRate => "API_ACCOUNT_RATE",
    EdgeDistributionRate => "EDGE_DISTRIBUTION_RATE",
    BucketsForRate => "BUCKETS_FOR_RATE",
    FleetReadyLate => "FLEET_READY_LATE",
    FleetCapped => "FLEET_CAPPED",
    AccountConcurrency => "ACCOUNT_CONCURRENCY",
    MailDrain => "MAIL_DRAIN",
    MailSandbox => "MAIL_SANDBOX",
    LimitsUnknown => "LIMITS_UNKNOWN",
    BucketsShareAMaster => "BUCKETS_SHARE_A_MASTER",
}

fn warning(code: WarningCode, detail: String) -> Warning {
    Warning { code: code.as_str(), detail }
}

/// What stands between the event's expected rate and its open: each limit that rate exceeds, and
/// each limit that could not be read. Empty when the organiser named no rate.
pub fn warnings(event: &Event, deployment: &DeploymentLimits, account: &AccountLimits) -> Vec<Warning> {
    let Some(rate) = event.expected_rate else {
        return Vec::new();
    };
    let mut out = Vec::new();
    // Every grab is preceded by a verify-hash: the stage sees two requests per grab.
    let requests = rate.saturating_mul(2);
    if let Some(limit) = deployment.grab_route.filter(|l| rate > *l) {
        out.push(warning(
            WarningCode::GrabRouteThrottle,
            format!("the grab route is throttled at {limit}/s; raise GrabThrottle to at least {rate}"),
        ));
    }
    if let Some(limit) = deployment.verify_hash_route.filter(|l| rate > *l) {
        out.push(warning(
            WarningCode::VerifyHashRouteThrottle,
            format!("the verify-hash route is throttled at {limit}/s; raise VerifyHashThrottle to at least {rate}"),
        ));
    }
    if let Some(limit) = deployment.stage.filter(|l| requests > *l) {
        out.push(warning(
            WarningCode::StageThrottle,
            format!("the stage is throttled at {limit}/s and the open needs {requests}/s; raise ThrottlingRateLimit"),
        ));
    }
    if requests > API_ACCOUNT_RATE {
        out.push(warning(
            WarningCode::ApiAccountRate,
            format!(
                "the open needs {requests} requests/s and API Gateway allows {API_ACCOUNT_RATE}/s per account by default (no API reads it); ask AWS for a raise"
            ),
        ));
    }
    let at_the_edge = rate.saturating_mul(EDGE_REQUESTS_PER_GRAB);
    if deployment.edge && at_the_edge > EDGE_DISTRIBUTION_RATE {
        out.push(warning(
            WarningCode::EdgeDistributionRate,
            format!(
                "the open needs {at_the_edge} requests/s at the edge (the state read before verify-hash and before the grab) and a CloudFront distribution takes {EDGE_DISTRIBUTION_RATE}/s by default (no API reads it); ask AWS for a raise"
            ),
        ));
    }
    let grants = u32::from(event.buckets).saturating_mul(GRANTS_PER_BUCKET);
    if rate > grants {
        let needed = rate.div_ceil(GRANTS_PER_BUCKET);
        let most = u32::from(super::event::MAX_BUCKETS);
        out.push(warning(
            WarningCode::BucketsForRate,
            if needed <= most {
                format!(
                    "{} bucket(s) grant about {grants} a second on the cache as deployed (docs/SCALE.md); release with {needed} buckets, each on its own master",
                    event.buckets
                )
            } else {
                format!(
                    "{} bucket(s) grant about {grants} a second on the cache as deployed (docs/SCALE.md), and the most a release accepts, {most}, about {}; split the sale, or expect the open to take longer",
                    event.buckets,
                    most * GRANTS_PER_BUCKET
                )
            },
        ));
    }
    let wanted = FleetSize::for_rate(rate);
    let fleet = wanted.capped(deployment);
    let largest = fleet.grab.max(fleet.verify_hash);
    if largest > READY_WITHIN_LEAD {
        out.push(warning(
            WarningCode::FleetReadyLate,
            format!(
                "the warm fleet asks {largest} environments of one function, and Lambda readies about {PROVISIONED_PER_MINUTE} a minute: {:.0} min, more than the {} min before the open it is asked for (longer and its connections die while frozen); the open meets a fleet still growing: a lower expected_rate, or Managed Instances (docs/DEPLOY.md)",
                f64::from(largest) / f64::from(PROVISIONED_PER_MINUTE),
                LEAD.whole_minutes()
            ),
        ));
    }
    if fleet != wanted {
        out.push(warning(
            WarningCode::FleetCapped,
            format!(
                "the open needs {} grab and {} verify-hash environments, and reserved concurrency allows {} and {}; raise GrabReservedConcurrency and VerifyHashReservedConcurrency",
                wanted.grab, wanted.verify_hash, fleet.grab, fleet.verify_hash
            ),
        ));
    }
    match account.concurrency {
        Some(limit) if fleet.total() > limit.saturating_sub(UNRESERVED_MINIMUM) => out.push(warning(
            WarningCode::AccountConcurrency,
            format!(
                "the warm fleet needs {} environments and the account allows {limit}, {UNRESERVED_MINIMUM} of them never to be provisioned; ask AWS to raise Lambda's concurrent executions",
                fleet.total()
            ),
        )),
        _ => {}
    }
    if let Some(per_second) = account.mail_rate.filter(|r| *r > 0.0) {
        let drain = f64::from(event.capacity) / per_second;
        if drain > MAIL_DRAIN.as_seconds_f64() {
            out.push(warning(
                WarningCode::MailDrain,
                format!(
                    "SES sends {per_second}/s: {} confirmations take {:.0} min; ask AWS to raise the sending rate",
                    event.capacity,
                    drain / 60.0
                ),
            ));
        }
    }
    if account.mail_production == Some(false) {
        out.push(warning(
            WarningCode::MailSandbox,
            "SES is in its sandbox and mails only verified addresses; request production access".into(),
        ));
    }
    let unknown: Vec<&str> = [
        ("Lambda's account concurrency", account.concurrency.is_none()),
        ("SES's sending rate", account.mail_rate.is_none() || account.mail_production.is_none()),
    ]
    .into_iter()
    .filter_map(|(what, missing)| missing.then_some(what))
    .collect();
    if !unknown.is_empty() {
        out.push(warning(
            WarningCode::LimitsUnknown,
            format!("could not read {}; check them by hand (docs/DEPLOY.md)", unknown.join(" and ")),
        ));
    }
    out
}

/// Buckets on one master do not add to its throughput: a sharded sale runs at the rate of its
/// busiest master. `masters` names each bucket's master, in bucket order (the cluster's slot map
/// at release); a warning when two share one.
pub fn shared_masters(masters: &[String]) -> Option<Warning> {
    let mut held: std::collections::BTreeMap<&str, Vec<usize>> = std::collections::BTreeMap::new();
    for (bucket, master) in masters.iter().enumerate() {
        held.entry(master).or_default().push(bucket);
    }
    if held.len() == masters.len() {
        return None;
    }
    let shared: Vec<String> = held
        .iter()
        .filter(|(_, buckets)| buckets.len() > 1)
        .map(|(master, buckets)| {
            let listed: Vec<String> = buckets.iter().map(usize::to_string).collect();
            format!("buckets {} on {master}", listed.join(", "))
        })
        .collect();
    Some(warning(
        WarningCode::BucketsShareAMaster,
        format!(
            "{} buckets sit on {} masters ({}): the sale runs at its busiest master's rate; give the cache a shard per bucket, or release with {} buckets",
            masters.len(),
            held.len(),
            shared.join("; "),
            held.len()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;
    use crate::EventDraft;

    #[test]
    fn buckets_sharing_a_master_are_named_and_distinct_ones_pass() {
        let on = |m: &[&str]| m.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(shared_masters(&on(&["a:1", "b:1", "c:1"])), None);
        assert_eq!(shared_masters(&on(&[])), None);
        let shared = shared_masters(&on(&["a:1", "b:1", "a:1", "c:1"])).expect("a warning");
        assert_eq!(shared.code, "BUCKETS_SHARE_A_MASTER");
        assert!(shared.detail.starts_with("4 buckets sit on 3 masters (buckets 0, 2 on a:1)"), "{}", shared.detail);
        assert!(shared.detail.ends_with("release with 3 buckets"), "{}", shared.detail);
    }

    fn event(id: &str, capacity: u32, start: OffsetDateTime, rate: Option<u32>) -> Event {
        let draft = EventDraft::from_json(&serde_json::json!({
            "id": id, "title": "t", "capacity": capacity,
            "sale_start": crate::event::rfc3339(start),
            "sale_end": crate::event::rfc3339(start + Duration::hours(1)),
            "expected_rate": rate,
        }))
        .unwrap();
        draft.into_event(start - Duration::hours(1)).unwrap()
    }

    const OPEN: OffsetDateTime = datetime!(2026-12-01 09:00 UTC);

    #[test]
    fn the_fleet_serves_ten_requests_a_second_per_environment_and_grab_a_fifth_more() {
        // Calls of milliseconds: Lambda's 10 requests a second per environment size the fleet, not
        // Little's law (which would ask 2,400 and 400).
        assert_eq!(FleetSize::for_rate(100_000), FleetSize { grab: 12_000, verify_hash: 10_000 });
        assert_eq!(FleetSize::for_rate(1), FleetSize { grab: 1, verify_hash: 1 });
        let limits = DeploymentLimits { grab_reserved: Some(1_000), ..Default::default() };
        assert_eq!(FleetSize::for_rate(100_000).capped(&limits), FleetSize { grab: 1_000, verify_hash: 10_000 });
        // A call held longer than a tenth of a second would be sized by its duration.
        assert_eq!(environments(1_000, 0.5, 1.0), 1_000);
    }

    #[test]
    fn the_fleet_is_kept_from_the_lead_to_the_tail_and_overlapping_opens_add_up() {
        let limits = DeploymentLimits::default();
        let a = event("a", 100, OPEN, Some(10_000));
        let b = event("b", 100, OPEN + Duration::minutes(3), Some(5_000));
        let plain = event("c", 100, OPEN, None);
        let all = [a, b, plain];
        assert_eq!(wanted(&all, OPEN - LEAD - Duration::seconds(1), &limits), FleetSize::default());
        assert_eq!(wanted(&all, OPEN - LEAD, &limits), FleetSize::for_rate(10_000));
        assert_eq!(wanted(&all, OPEN, &limits), FleetSize { grab: 1_200 + 600, verify_hash: 1_000 + 500 });
        assert_eq!(wanted(&all, OPEN + TAIL, &limits), FleetSize::for_rate(5_000));
        assert_eq!(wanted(&all, OPEN + Duration::minutes(3) + TAIL, &limits), FleetSize::default());
        let capped =
            DeploymentLimits { grab_reserved: Some(300), verify_hash_reserved: Some(50), ..Default::default() };
        assert_eq!(wanted(&all, OPEN, &capped), FleetSize { grab: 300, verify_hash: 50 });
        // The events the fleet is for, named while it is kept, until the last window closes.
        let named = |now| {
            let (ids, until) = warming(&all, now, &limits);
            (ids.iter().map(|id| id.as_str().to_owned()).collect::<Vec<_>>(), until)
        };
        assert_eq!(named(OPEN - LEAD - Duration::seconds(1)), (vec![], std::time::Duration::ZERO));
        assert_eq!(named(OPEN - LEAD), (vec!["a".to_owned()], std::time::Duration::try_from(LEAD + TAIL).unwrap()));
        assert_eq!(
            named(OPEN),
            (vec!["a".to_owned(), "b".to_owned()], std::time::Duration::try_from(Duration::minutes(3) + TAIL).unwrap())
        );
        assert_eq!(named(OPEN + Duration::minutes(3) + TAIL).0, Vec::<String>::new());
    }

    /// A rate above what the event's buckets grant is named with the buckets it takes, and past
    /// the most a release accepts, with what is left to do.
    #[test]
    fn a_rate_above_its_buckets_is_named_with_the_buckets_it_takes() {
        let on = |buckets: u16, rate: u32| {
            let mut e = event("a", 20_000, OPEN, Some(rate));
            e.buckets = buckets;
            warnings(&e, &DeploymentLimits::default(), &AccountLimits::default())
                .into_iter()
                .find(|w| w.code == "BUCKETS_FOR_RATE")
                .map(|w| w.detail)
        };
        assert_eq!(on(14, 100_000), None);
        assert!(on(1, 100_000).is_some_and(|d| d.contains("release with 14 buckets")));
        assert!(on(16, 200_000).is_some_and(|d| d.contains("split the sale")));
    }

    /// A fleet Lambda cannot ready within the lead is named: the hot event's 14,400 grab
    /// environments are ready in time, a rate whose fleet takes longer is not.
    #[test]
    fn a_fleet_larger_than_the_lead_readies_is_named() {
        let ready_late = |rate| {
            codes(&warnings(
                &event("a", 20_000, OPEN, Some(rate)),
                &DeploymentLimits::default(),
                &AccountLimits::default(),
            ))
            .contains(&"FLEET_READY_LATE")
        };
        assert!(FleetSize::for_rate(120_000).grab <= READY_WITHIN_LEAD && !ready_late(120_000));
        assert!(FleetSize::for_rate(250_000).grab > READY_WITHIN_LEAD && ready_late(250_000));
    }

    #[test]
    fn an_event_without_a_rate_has_no_fleet_and_no_warnings() {
        let e = event("a", 100, OPEN, None);
        assert_eq!(WarmFleet::of(&e, &DeploymentLimits::default()), None);
        assert!(warnings(&e, &DeploymentLimits::default(), &AccountLimits::default()).is_empty());
    }

    fn codes(w: &[Warning]) -> Vec<&'static str> {
        w.iter().map(|w| w.code).collect()
    }

    #[test]
    fn each_limit_the_rate_exceeds_is_named_with_what_to_raise() {
        let deployment = DeploymentLimits {
            grab_route: Some(2_000),
            verify_hash_route: Some(2_000),
            stage: Some(5_000),
            grab_reserved: Some(200),
            verify_hash_reserved: Some(300),
            edge: true,
        };
        let account = AccountLimits { concurrency: Some(1_000), mail_rate: Some(14.0), mail_production: Some(false) };
        let w = warnings(&event("a", 20_000, OPEN, Some(100_000)), &deployment, &account);
        assert_eq!(
            codes(&w),
            [
                "GRAB_ROUTE_THROTTLE",
                "VERIFY_HASH_ROUTE_THROTTLE",
                "STAGE_THROTTLE",
                "API_ACCOUNT_RATE",
                "EDGE_DISTRIBUTION_RATE",
                "BUCKETS_FOR_RATE",
                "FLEET_CAPPED",
                "MAIL_DRAIN",
                "MAIL_SANDBOX"
            ]
        );
        assert!(w[0].detail.contains("GrabThrottle to at least 100000"), "{}", w[0].detail);
        assert!(w[4].detail.contains("400000 requests/s at the edge"), "{}", w[4].detail);
        assert!(w[5].detail.contains("release with 14 buckets"), "{}", w[5].detail);
        assert!(w[7].detail.contains("24 min"), "{}", w[7].detail);
        // Without the edge, its quota is not the open's.
        let no_edge = DeploymentLimits { edge: false, ..deployment };
        assert!(
            !codes(&warnings(&event("a", 20_000, OPEN, Some(100_000)), &no_edge, &account))
                .contains(&"EDGE_DISTRIBUTION_RATE")
        );
        // The fleet as capped (200 + 300) fits 1,000 less the unreserved 100; uncapped it would not.
        let uncapped = DeploymentLimits { grab_reserved: None, ..deployment };
        assert!(
            codes(&warnings(&event("a", 20_000, OPEN, Some(100_000)), &uncapped, &account))
                .contains(&"ACCOUNT_CONCURRENCY")
        );
    }

    #[test]
    fn a_rate_within_every_limit_warns_of_nothing_and_unread_limits_are_named() {
        let deployment = DeploymentLimits {
            grab_route: Some(3_000),
            verify_hash_route: Some(3_000),
            stage: Some(10_000),
            edge: true,
            ..Default::default()
        };
        let account = AccountLimits { concurrency: Some(1_000), mail_rate: Some(500.0), mail_production: Some(true) };
        let e = event("a", 100, OPEN, Some(3_000));
        assert!(warnings(&e, &deployment, &account).is_empty());
        let w = warnings(&e, &deployment, &AccountLimits::default());
        assert_eq!(codes(&w), ["LIMITS_UNKNOWN"]);
        assert!(w[0].detail.contains("Lambda's account concurrency and SES's sending rate"), "{}", w[0].detail);
    }
}
