//! `local-runner`: the system on a developer's machine. See the crate docs of `local_runner`.

use std::{net::SocketAddr, sync::Arc};

use clap::{Parser, Subcommand};
use local_runner::{
    Functions, LocalSettings,
    authorizer::{Authorizer, parse_ttl},
    demo, esm, mailbox, provision,
    server::{self, Front},
    stack,
};

#[derive(Parser)]
#[command(version, about = "Runs ticket-grab locally: redis-server, MiniStack and every function behind its routes")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Start the stack if needed, provision it, release a demo event and serve the API (default).
    Up {
        /// Address to serve on.
        #[arg(long, env = "LOCAL_ADDR", default_value = "127.0.0.1:3000")]
        addr: SocketAddr,
        /// Do not release the demo event.
        #[arg(long)]
        no_demo: bool,
        /// Leave a stack this command started running on exit.
        #[arg(long)]
        keep_stack: bool,
        /// How often reconcile runs (the schedule is one minute in AWS).
        #[arg(long, env = "RECONCILE_EVERY", default_value = "60s", value_parser = parse_ttl)]
        reconcile_every: std::time::Duration,
    },
    /// Mint a development token for the local authorizer.
    Token {
        #[arg(long)]
        sub: String,
        #[arg(long)]
        email: Option<String>,
        /// Put the user in the `admin` group.
        #[arg(long)]
        admin: bool,
        /// Put the user in this group too (repeatable): `--group staff` for door staff.
        #[arg(long = "group")]
        groups: Vec<String>,
        /// Lifetime: 30s, 15m, 1h, 2d.
        #[arg(long, default_value = "1h", value_parser = parse_ttl)]
        ttl: std::time::Duration,
    },
    /// List the mail the local SES accepted (MiniStack's /_ministack/ses/messages).
    Mail {
        /// Only mail to this address.
        #[arg(long)]
        to: Option<String>,
        /// Print the text body too.
        #[arg(long)]
        full: bool,
    },
    /// Provision the running stack (table, queues, sender identity, secrets) and print the orders
    /// queue's URL: what `sam local invoke` with env.json needs besides the stack.
    Provision,
    /// Print every per-user limit's variable (`RATE_LIMIT_<ROUTE>`), one a line, from the route
    /// table: what a run that must not meet the limits (scripts/attack) raises.
    Limits,
    /// Manage the local stack: start, stop or status.
    Stack {
        #[arg(value_parser = ["start", "stop", "status", "install"])]
        action: String,
    },
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let settings = LocalSettings::from_env()?;
    // No subcommand means `up`, with its flags' defaults and environment.
    let command = match Cli::parse().command {
        Some(command) => command,
        None => Cli::parse_from(["local-runner", "up"]).command.ok_or("no command")?,
    };
    match command {
        Command::Token { sub, email, admin, groups, ttl } => {
            let mut groups: Vec<&str> = groups.iter().map(String::as_str).collect();
            if admin {
                groups.push("admin");
            }
            println!("{}", Authorizer::new(&settings.jwt_secret).mint_in(&sub, email.as_deref(), &groups, ttl)?);
            Ok(())
        }
        Command::Stack { action } => Ok(stack::run(&action)?),
        Command::Limits => {
            for (_, setting, _) in shared::http::routes::per_user_limits() {
                println!("{setting}");
            }
            Ok(())
        }
        Command::Provision => {
            let sdk = settings.sdk_config().await;
            let queues =
                provision::all(&sdk, &settings.store.table_name, &settings.queue_name, &settings.mail.from).await?;
            println!("{}", queues.queue_url);
            Ok(())
        }
        Command::Mail { to, full } => {
            let mut sent = mailbox::sent(&settings.aws_endpoint).await?;
            sent.retain(|m| to.as_ref().is_none_or(|to| m.to.iter().any(|t| t == to)));
            sent.sort_by(|a, b| a.timestamp.total_cmp(&b.timestamp));
            for m in &sent {
                let at = time::OffsetDateTime::from_unix_timestamp(m.timestamp as i64)
                    .map(shared::domain::event::rfc3339)
                    .unwrap_or_default();
                println!("{at}  from {}  to {}\n  {}", m.source, m.to.join(", "), m.subject);
                if full {
                    println!("{}\n", m.body_text.lines().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n"));
                }
            }
            println!("{} mail(s)", sent.len());
            Ok(())
        }
        Command::Up { addr, no_demo, keep_stack, reconcile_every } => {
            up(settings, addr, no_demo, keep_stack, reconcile_every).await
        }
    }
}

async fn up(
    settings: LocalSettings,
    addr: SocketAddr,
    no_demo: bool,
    keep_stack: bool,
    reconcile_every: std::time::Duration,
) -> Result<(), Box<dyn std::error::Error>> {
    shared::telemetry::init();
    settings.check_listen_address(addr)?;
    let started_stack = !stack::is_up(&settings).await;
    if started_stack {
        eprintln!("starting the local stack (scripts/stack start)...");
        stack::run("start")?;
    }
    let sdk = settings.sdk_config().await;
    let queues = provision::all(&sdk, &settings.store.table_name, &settings.queue_name, &settings.mail.from).await?;
    let functions = Functions::build(&settings, &queues.queue_url).await?;
    let demo_event = if no_demo { None } else { Some(demo::release(&functions).await?) };

    let authorizer = Authorizer::new(&settings.jwt_secret);
    let day = std::time::Duration::from_secs(86_400);
    let user_token = authorizer.mint("demo-user", Some("demo-user@example.com"), false, day)?;
    let admin_token = authorizer.mint("demo-admin", Some("demo-admin@example.com"), true, day)?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    demo::print_guide(&format!("http://{}", listener.local_addr()?), demo_event.as_deref(), &user_token, &admin_token);

    // The mail function, fed as Lambda's event source mapping would.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let rush = esm::Rush::default();
    let poller = esm::Poller::new(aws_sdk_sqs::Client::new(&sdk), &queues.queue_url, functions.mail.clone())
        .yielding_to(rush.clone());
    let mail_consumer = esm::Switch::new(true);
    let polling = tokio::spawn(poller.run(4, mail_consumer.clone(), stop_rx));
    // reconcile, as the EventBridge schedule runs it.
    let reconcile = functions.reconcile.clone();
    let reconciling = tokio::spawn(async move {
        let mut timer = tokio::time::interval(reconcile_every.max(std::time::Duration::from_secs(1)));
        timer.tick().await;
        loop {
            timer.tick().await;
            reconcile.run().await;
        }
    });

    let front =
        Arc::new(Front { functions, authorizer, mail_consumer, rush, pages: pages::Pages::default(), patience: 1 });
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    server::serve(listener, front, shutdown).await?;
    let _ = stop_tx.send(true);
    let _ = polling.await;
    reconciling.abort();
    if started_stack && !keep_stack {
        eprintln!("stopping the local stack...");
        stack::run("stop")?;
    }
    Ok(())
}
