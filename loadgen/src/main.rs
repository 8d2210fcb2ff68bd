//! `loadgen`: one sale of the seeds' sizes against a base URL, a report, and a non-zero exit when
//! an invariant does not hold.

use std::{path::PathBuf, time::Duration};

use clap::{Parser, ValueEnum};
use loadgen::{
    api::Api,
    fanout::{FanOut, LambdaWorkers, run_fanned},
    run::{Plan, Users, run},
};
use local_runner::authorizer::Authorizer;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Scenario {
    /// The campus lecture: 2,000 students, 100 tickets.
    Lecture,
    /// The red-packet drop: 30,000 users, 20,000 packets of random amounts (8.88 CNY each on average).
    Redpacket,
    /// One user firing 200 grabs at once.
    HotUser,
    /// A ballot: 2,000 users enter for 100 tickets (some twice at once), the organiser draws, the
    /// draw is recomputed and the winners' orders checked against it.
    Ballot,
    /// A fair open: 2,000 users queue for 100 tickets, the draw shuffles them at the open, each
    /// waits for their wave, asks verify-hash with their admission and grabs.
    FairOpen,
    /// --users and --tickets of your own.
    Custom,
    /// A ballot of a million entrants, as a benchmark: --through-runner of them enter over HTTP,
    /// the rest are loaded straight into the table, the organiser draws through the API, the
    /// whole published draw is read, recomputed and written (--draw-out), and one entrant asks
    /// for their place and proof. Local runner only (the table is the runner's).
    BallotScale,
}

#[derive(Parser)]
#[command(version, about = "Runs a ticket sale against the local runner or a deployed API and checks every invariant")]
struct Cli {
    #[arg(value_enum)]
    scenario: Scenario,
    /// The API's base URL.
    #[arg(long, env = "LOADGEN_BASE_URL", default_value = "http://127.0.0.1:3000")]
    base_url: String,
    /// Users (default: the scenario's).
    #[arg(long)]
    users: Option<usize>,
    /// Tickets (default: the scenario's).
    #[arg(long)]
    tickets: Option<u32>,
    /// Requests in flight at once (default 64; the hot user's 200).
    #[arg(long)]
    concurrency: Option<usize>,
    /// Mint HS256 tokens with this secret (the local runner's authorizer).
    #[arg(long, env = "LOCAL_JWT_SECRET", default_value = "local-dev-jwt-secret-not-for-production")]
    jwt_secret: String,
    /// Pre-issued user tokens for a deployed API, one per line (then --admin-token too).
    #[arg(long, requires = "admin_token")]
    tokens_file: Option<PathBuf>,
    /// An admin's token for a deployed API.
    #[arg(long, env = "LOADGEN_ADMIN_TOKEN")]
    admin_token: Option<String>,
    /// Seconds from the release to the opening of the sale (default 2; ballot-scale: the entries'
    /// close, by default --through-runner at --entry-rate-floor a second plus a minute).
    #[arg(long)]
    lead_seconds: Option<f64>,
    /// ballot-scale: entrants in all.
    #[arg(long, default_value_t = 1_000_000)]
    entrants: usize,
    /// ballot-scale: of them, entering through the runner over HTTP (the rest are loaded into the
    /// table).
    #[arg(long, default_value_t = 20_000)]
    through_runner: usize,
    /// ballot-scale: the HTTP entries' rate assumed when placing the entries' close (entries/s).
    #[arg(long, default_value_t = 400.0)]
    entry_rate_floor: f64,
    /// ballot-scale: how long to wait for the draw's reply and each page's (seconds).
    #[arg(long, default_value_t = 1800.0)]
    http_timeout_seconds: f64,
    /// ballot-scale: requests of the draw at most (a draw answers 202 until it is finished, and
    /// one cut off at the function's timeout goes on when asked again).
    #[arg(long, default_value_t = 200)]
    draw_attempts: usize,
    /// ballot-scale: the local runner's process id: its memory (VmRSS, VmHWM) is read between the
    /// phases.
    #[arg(long)]
    runner_pid: Option<u32>,
    /// ballot-scale: the emulator's process id, read as the runner's.
    #[arg(long)]
    emulator_pid: Option<u32>,
    /// How long to wait for every winner to be confirmed and mailed.
    #[arg(long, default_value_t = 900.0)]
    confirm_timeout_seconds: f64,
    /// MiniStack's URL: also count the mail the local SES really accepted.
    #[arg(long)]
    mailbox: Option<String>,
    /// Hold the local runner's mail consumer from the opening to the last grab reply: the grabs
    /// then have the emulator to themselves, as its raw SendMessage rate is measured; the drain
    /// follows. Local runner only.
    #[arg(long)]
    hold_mail: bool,
    /// Red packets: split this total (in the currency's smallest unit) into the tickets' amounts
    /// at release, and check every winner's (the redpacket scenario: 888 units a packet on average).
    #[arg(long)]
    total_amount: Option<u64>,
    /// A fair open's admission rate: users admitted per second (default: the tickets, so the
    /// first wave holds them all).
    #[arg(long)]
    admission_rate: Option<u32>,
    /// A ballot's or a fair open's work per entry (ticket-pow/v1 bits): released with it, each
    /// user solves it before entering.
    #[arg(long)]
    proof_of_work_bits: Option<u32>,
    /// A ballot's or a fair open's published draw, written here whole: every page of
    /// `GET /events/{id}/draw` joined (what `ticketgrab-verify draw` reads).
    #[arg(long)]
    draw_out: Option<PathBuf>,
    /// A ballot's or a fair open's first user's entry receipt, written here with their entry key
    /// and the event's receipt keys (`GET /events/{id}/receipt-key`): what
    /// `ticketgrab-verify receipt` reads.
    #[arg(long)]
    receipt_out: Option<PathBuf>,
    /// Split the numbers over this many Redis buckets (hash tags on spread slots) at release: a
    /// first-come sale past one shard.
    #[arg(long)]
    buckets: Option<u16>,
    /// Each user asks verify-hash and then grabs at once, from the opening, as people do (by
    /// default every user's hash is had before the opening, and the opening is grabs alone).
    #[arg(long)]
    per_user: bool,
    /// Stop at the last grab reply: check the replies, neither wait for the drain nor check it
    /// (a rush measured alone).
    #[arg(long)]
    rush_only: bool,
    /// Start the users at this many a second from the opening (each user's first request no
    /// earlier than its turn; `--concurrency` bounds what is in flight), rather than all at once.
    /// With `--fan-out`, spread evenly over the workers.
    #[arg(long)]
    rate: Option<f64>,
    /// Fan the rush out over this many load workers (the load kit's function, `loadkit/`), each a
    /// slice of the users, all opening at once; the release, the drain and the checks stay here.
    /// A deployed API: with --tokens-file and --admin-token.
    #[arg(long, requires = "worker_function")]
    fan_out: Option<usize>,
    /// The load kit's worker function (its name or ARN: the kit's `WorkerFunctionName` output),
    /// invoked through the Lambda API (credentials, region and `AWS_ENDPOINT_URL` from the
    /// environment).
    #[arg(long, env = "LOADGEN_WORKER_FUNCTION", requires = "fan_out")]
    worker_function: Option<String>,
    /// The red packets' currency (ISO 4217).
    #[arg(long, default_value = "CNY")]
    currency: String,
    /// Write the report as JSON here too (and the sale's chart beside it, as `.svg`).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Draw the sale here (SVG): grabs per second by outcome, latency percentiles, the drain.
    /// By default beside `--json`.
    #[arg(long)]
    chart: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let (users, tickets, grabs_per_user, concurrency) = match cli.scenario {
        Scenario::Lecture => (2_000, 100, 1, 64),
        Scenario::Redpacket => (30_000, 20_000, 1, 64),
        Scenario::HotUser => (1, 100, 200, 200),
        Scenario::Ballot | Scenario::FairOpen => (2_000, 100, 1, 64),
        Scenario::BallotScale => (cli.through_runner.min(cli.entrants), 1_000, 1, 64),
        Scenario::Custom => {
            let (Some(users), Some(tickets)) = (cli.users, cli.tickets) else {
                return Err("custom needs --users and --tickets".into());
            };
            (users, tickets, 1, 64)
        }
    };
    let users = cli.users.unwrap_or(users);
    let tickets = cli.tickets.unwrap_or(tickets);
    let concurrency = cli.concurrency.unwrap_or(concurrency).max(1);
    let scenario = format!("{:?}", cli.scenario).to_lowercase();

    let participants = match (&cli.tokens_file, &cli.admin_token) {
        (Some(file), Some(admin)) => {
            let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
            let tokens: Vec<String> =
                text.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned).take(users).collect();
            if tokens.len() < users {
                return Err(
                    format!("{} holds {} tokens; {users} users need as many", file.display(), tokens.len()).into()
                );
            }
            Users { admin: admin.clone(), emails: vec![None; tokens.len()], subs: vec![None; tokens.len()], tokens }
        }
        _ => mint(&cli.jwt_secret, users)?,
    };
    let plan = Plan {
        scenario,
        tickets,
        concurrency,
        grabs_per_user,
        lead: Duration::from_secs_f64(cli.lead_seconds.unwrap_or(2.0).max(0.0)),
        confirm_timeout: Duration::from_secs_f64(cli.confirm_timeout_seconds.max(1.0)),
        mailbox: cli.mailbox.clone(),
        hold_mail: cli.hold_mail,
        red_packets: cli
            .total_amount
            .or(matches!(cli.scenario, Scenario::Redpacket).then_some(u64::from(tickets) * 888))
            .map(|total| (total, cli.currency.clone())),
        admission_rate: cli.admission_rate,
        proof_of_work_bits: cli.proof_of_work_bits,
        draw_out: cli.draw_out.clone(),
        buckets: cli.buckets,
        per_user: cli.per_user,
        rush_only: cli.rush_only,
        rate: cli.rate.filter(|r| *r > 0.0),
    };
    let api = Api::new(&cli.base_url, concurrency)?;
    if let Scenario::BallotScale = cli.scenario {
        let scale = loadgen::ballot_scale::Scale {
            entrants: cli.entrants,
            through_runner: users,
            tickets,
            concurrency,
            lead: cli.lead_seconds.map(|s| Duration::from_secs_f64(s.max(0.0))),
            entry_rate_floor: cli.entry_rate_floor,
            http_timeout: Duration::from_secs_f64(cli.http_timeout_seconds.max(1.0)),
            draw_attempts: cli.draw_attempts,
            draw_out: cli.draw_out.clone(),
            runner_pid: cli.runner_pid,
            emulator_pid: cli.emulator_pid,
        };
        let report = loadgen::ballot_scale::run(&api, &cli.base_url, &participants, &scale).await?;
        print!("{}", report.render());
        if let Some(path) = &cli.json {
            std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
        }
        if !report.passed {
            std::process::exit(1);
        }
        return Ok(());
    }
    let mut report = match (cli.scenario, cli.fan_out, &cli.worker_function) {
        (Scenario::Ballot | Scenario::FairOpen, Some(_), _) => {
            return Err("--fan-out runs a first-come rush: not a ballot's or a fair open's".into());
        }
        (Scenario::Ballot, ..) => {
            loadgen::ballot::run_ballot(&api, &participants, &plan, cli.receipt_out.as_deref()).await?
        }
        (Scenario::FairOpen, ..) => {
            loadgen::ballot::run_fair_open(&api, &participants, &plan, cli.receipt_out.as_deref()).await?
        }
        (_, Some(workers), Some(function)) => {
            let fan = FanOut { workers: workers.max(1), base_url: cli.base_url.clone() };
            run_fanned(&api, &participants, &plan, &fan, &LambdaWorkers::new(function).await).await?
        }
        _ => run(&api, &participants, &plan).await?,
    };
    report.base_url = cli.base_url.clone();
    print!("{}", report.render());
    if let Some(path) = &cli.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
    }
    // A ballot has no grabs to draw: its chart only when asked for.
    let beside_json = cli.json.as_ref().filter(|_| report.ballot.is_none()).map(|j| j.with_extension("svg"));
    if let Some(path) = cli.chart.clone().or(beside_json) {
        // The start to the second (RFC 3339 without the fraction).
        let started = report.started_at.split('.').next().unwrap_or_default().trim_end_matches('Z');
        let title = format!(
            "{}: {} users, {} tickets ({started}Z, {})",
            report.scenario, report.users, report.tickets, report.base_url
        );
        loadgen::chart::draw(&report.timeline, &title, &path)?;
        println!("chart: {}", path.display());
    }
    if !report.passed {
        std::process::exit(1);
    }
    Ok(())
}

/// Development tokens for `users` users of this run (fresh ids, so runs never meet) and an admin.
fn mint(secret: &str, users: usize) -> Result<Users, Box<dyn std::error::Error>> {
    let auth = Authorizer::new(secret);
    let run = &uuid::Uuid::now_v7().simple().to_string()[20..];
    let day = Duration::from_secs(86_400);
    let admin = auth.mint(&format!("lg-{run}-admin"), Some("organiser@example.com"), true, day)?;
    let mut tokens = Vec::with_capacity(users);
    let mut emails = Vec::with_capacity(users);
    let mut subs = Vec::with_capacity(users);
    for i in 0..users {
        let sub = format!("lg-{run}-{i}");
        let email = format!("{sub}@example.com");
        tokens.push(auth.mint(&sub, Some(&email), false, day)?);
        emails.push(Some(email));
        subs.push(Some(sub));
    }
    Ok(Users { admin, tokens, emails, subs })
}
