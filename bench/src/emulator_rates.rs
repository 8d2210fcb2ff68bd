//! emulator-rates: MiniStack's own rate for each call an order makes, at a given concurrency, so
//! that end-to-end figures can stand beside what the emulator allows.
//!
//! Per order, the product makes: one `SendMessage` (grab), then in the consumer one
//! `TransactWriteItems` (order + ticket), the mail claim and the mail-sent `UpdateItem`s, one SES
//! `SendEmail`, and a tenth of a `ReceiveMessage` and of a `DeleteMessageBatch` (batches of 10).
//! The drain bound printed after the rates adds up the time each call type takes at its measured
//! rate (MiniStack serves calls one at a time, so times add); the receive is measured on a queue
//! of `calls` messages, and again at the sale's depth (`--deep`), because MiniStack's receive and
//! batch delete scan the whole queue.
//!
//! Then the sale replay (`sale_replay`): the red-packet sale's emulator calls alone, in the
//! pattern the sale makes them: the floor that loadgen's end-to-end figures are measured against;
//! once with the consumer draining beside the sends, once with it held until the last send.

mod sale_replay;

use std::time::Instant;

use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use aws_sdk_sesv2::types::{Body, Content, Destination, EmailContent, Message};
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, SendMessageBatchRequestEntry};
use clap::Parser;
use futures::StreamExt;

#[derive(Parser)]
struct Args {
    /// Calls per measurement; 0 skips the per-call rates (the replay alone).
    #[arg(long, default_value_t = 2_000)]
    calls: usize,
    /// Calls in flight at once.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Receive and delete again on a queue this deep (the red packet's winners); 0 skips it.
    #[arg(long, default_value_t = 20_000)]
    deep: usize,
    /// Orders in the sale replay (the red packet's winners); 0 skips it.
    #[arg(long, default_value_t = 20_000)]
    sale: usize,
    /// Which replays: the consumer draining beside the sends, held until the last send, or both.
    #[arg(long, value_enum, default_value_t = Replays::Both)]
    replay: Replays,
    /// The replay's grab sends in flight (loadgen's concurrency).
    #[arg(long, default_value_t = 64)]
    senders: usize,
    /// The replay's pollers and messages handled at once per batch (the local runner's).
    #[arg(long, default_value_t = 4)]
    pollers: usize,
    #[arg(long, default_value_t = 8)]
    batch_concurrency: usize,
    /// Write the rates as JSON here too.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Replays {
    Concurrent,
    Held,
    Both,
}

pub type Failure = Box<dyn std::error::Error + Send + Sync>;

async fn rate<F, Fut>(args: &Args, calls: usize, f: F) -> Result<f64, Failure>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Result<(), Failure>>,
{
    let started = Instant::now();
    let results: Vec<Result<(), Failure>> =
        futures::stream::iter(0..calls).map(f).buffer_unordered(args.concurrency).collect().await;
    results.into_iter().collect::<Result<Vec<()>, _>>()?;
    Ok(calls as f64 / started.elapsed().as_secs_f64())
}

#[tokio::main]
async fn main() -> Result<(), Failure> {
    let args = Args::parse();
    let settings = local_runner::LocalSettings::from_env()?;
    println!("emulator-rates: MiniStack at {}, {} in flight", settings.aws_endpoint, args.concurrency);
    let rates = if args.calls > 0 { Some(rates(&args, &settings).await?) } else { None };
    let mut replays = Vec::new();
    if args.sale > 0 {
        // The ways loadgen runs the red packet: the consumer draining beside the sends, and held
        // until the last send (`loadgen --hold-mail`).
        let modes: &[bool] = match args.replay {
            Replays::Concurrent => &[false],
            Replays::Held => &[true],
            Replays::Both => &[false, true],
        };
        for &held in modes {
            println!();
            let shape = sale_replay::Shape {
                orders: args.sale,
                senders: args.senders,
                pollers: args.pollers,
                concurrency: args.batch_concurrency,
                held,
            };
            let replay = sale_replay::run(&settings, &shape).await?;
            replay.print();
            replays.push(replay);
        }
    }
    if let Some(path) = &args.json {
        let json = serde_json::json!({
            "concurrency": args.concurrency,
            "rates": rates,
            "sale_replay": replays.iter().find(|r| !r.held),
            "sale_replay_held": replays.iter().find(|r| r.held),
        });
        std::fs::write(path, serde_json::to_string_pretty(&json)?)?;
    }
    Ok(())
}

/// MiniStack's rate for each call an order makes, measured alone.
#[derive(serde::Serialize)]
struct Rates {
    calls: usize,
    sqs_send_per_s: f64,
    sqs_receive_delete_batches_per_s: f64,
    deep: usize,
    sqs_receive_delete_batches_per_s_deep: Option<f64>,
    ddb_transact_per_s: f64,
    ddb_update_per_s: f64,
    ses_send_per_s: f64,
    drain_s_per_1000_orders_two_updates: f64,
    drain_s_per_1000_orders_two_updates_deep: f64,
}

async fn rates(args: &Args, settings: &local_runner::LocalSettings) -> Result<Rates, Failure> {
    // The emulator's own throughput, so no call gives up: at 20,000 deep a receive waits seconds
    // behind the 63 others in flight, and the product's two-second attempt timeout would abandon
    // it (MiniStack still hides its messages) and send it again.
    let patient = aws_sdk_sqs::config::timeout::TimeoutConfig::builder()
        .connect_timeout(std::time::Duration::from_secs(1))
        .operation_attempt_timeout(std::time::Duration::from_secs(120))
        .operation_timeout(std::time::Duration::from_secs(120))
        .build();
    let sdk = settings.sdk_config().await.into_builder().timeout_config(patient).build();
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let ddb = aws_sdk_dynamodb::Client::new(&sdk);
    let ses = aws_sdk_sesv2::Client::new(&sdk);
    let run = uuid::Uuid::now_v7().simple().to_string();
    let table = format!("rates-{run}");
    local_runner::provision::ensure_table(&ddb, &table).await?;
    let (queue, _) = local_runner::provision::ensure_queues(&sqs, &format!("rates-{run}")).await?;
    let sender = "rates@example.com";
    local_runner::provision::ensure_sender(&ses, sender).await?;
    let body = r#"{"v":1,"order_id":"0199a0b0-0000-7000-8000-000000000000","event_id":"rates","user_id":"u","email":"u@example.com","created_at":"2026-11-22T10:00:00Z","ticket_no":1}"#;
    let n = args.calls;
    println!("{n} calls each");

    let send = rate(args, n, |_| {
        let (sqs, queue) = (&sqs, &queue);
        async move {
            sqs.send_message().queue_url(queue).message_body(body).send().await?;
            Ok(())
        }
    })
    .await?;
    // The queue now holds n messages: receive and delete them in batches of 10.
    let receive = drain(args, &sqs, &queue, n / 10).await?;
    // The same at the depth a sale reaches: fill the queue in batches (not measured), then drain
    // as much as above from the top of it.
    let receive_deep = if args.deep > 0 {
        fill(&sqs, &queue, body, args.deep).await?;
        let rate = drain(args, &sqs, &queue, n / 10).await?;
        sqs.purge_queue().queue_url(&queue).send().await?;
        Some(rate)
    } else {
        None
    };
    let s = |v: String| AttributeValue::S(v);
    let transact = rate(args, n, |i| {
        let (ddb, table, s) = (&ddb, &table, &s);
        async move {
            let put = |pk: String| -> Result<TransactWriteItem, Failure> {
                let put = Put::builder()
                    .table_name(table)
                    .item("PK", s(pk))
                    .item("SK", s("X".into()))
                    .item("order_id", s(format!("o{i}")))
                    .condition_expression("attribute_not_exists(PK)")
                    .build()?;
                Ok(TransactWriteItem::builder().put(put).build())
            };
            ddb.transact_write_items()
                .transact_items(put(format!("ORDER#{i}"))?)
                .transact_items(put(format!("TICKET#{i}"))?)
                .send()
                .await?;
            Ok(())
        }
    })
    .await?;
    let update = rate(args, n, |i| {
        let (ddb, table, s) = (&ddb, &table, &s);
        async move {
            ddb.update_item()
                .table_name(table)
                .key("PK", s(format!("ORDER#{i}")))
                .key("SK", s("X".into()))
                .update_expression("SET mail_status = :m")
                .condition_expression("order_id = :o")
                .expression_attribute_values(":m", s("SENDING".into()))
                .expression_attribute_values(":o", s(format!("o{i}")))
                .send()
                .await?;
            Ok(())
        }
    })
    .await?;
    let mail = rate(args, n, |i| {
        let ses = &ses;
        async move {
            let text = |t: &str| Content::builder().data(t).charset("UTF-8").build();
            let message =
                Message::builder().subject(text("rates")?).body(Body::builder().text(text("a mail")?).build()).build();
            ses.send_email()
                .from_email_address(sender)
                .destination(Destination::builder().to_addresses(format!("rates-{i}@example.com")).build())
                .content(EmailContent::builder().simple(message).build())
                .send()
                .await?;
            Ok(())
        }
    })
    .await?;

    println!("{:<40} {:>10}", "call", "calls/s");
    for (name, r) in [
        ("SQS SendMessage", send),
        ("SQS ReceiveMessage(10) + DeleteMessageBatch", receive),
        ("  the same, queue `--deep` messages deep", receive_deep.unwrap_or(f64::NAN)),
        ("DynamoDB TransactWriteItems (2 puts)", transact),
        ("DynamoDB UpdateItem (conditional)", update),
        ("SES SendEmail", mail),
    ] {
        println!("{name:<40} {r:>10.0}");
    }
    // Seconds of emulator time one order costs in the consumer, at these rates.
    let per_order = |updates: f64, receive: f64| 1.0 / transact + updates / update + 1.0 / mail + 0.1 / receive;
    println!();
    println!("drain bound per 1,000 orders (consumer calls at these rates; shallow queue / --deep queue):");
    let deep = receive_deep.unwrap_or(receive);
    println!(
        "  2 UpdateItem per order (claim, sent): {:>6.2} s / {:>6.2} s",
        1000.0 * per_order(2.0, receive),
        1000.0 * per_order(2.0, deep)
    );
    println!("grab bound per 1,000 winners (one SendMessage each): {:.2} s", 1000.0 / send);
    sqs.delete_queue().queue_url(&queue).send().await?;
    ddb.delete_table().table_name(&table).send().await?;
    Ok(Rates {
        calls: n,
        sqs_send_per_s: send,
        sqs_receive_delete_batches_per_s: receive,
        deep: args.deep,
        sqs_receive_delete_batches_per_s_deep: receive_deep,
        ddb_transact_per_s: transact,
        ddb_update_per_s: update,
        ses_send_per_s: mail,
        drain_s_per_1000_orders_two_updates: 1000.0 * per_order(2.0, receive),
        drain_s_per_1000_orders_two_updates_deep: 1000.0 * per_order(2.0, deep),
    })
}

/// Receives and deletes `batches` batches of 10, `--concurrency` at a time; batches per second.
async fn drain(args: &Args, sqs: &aws_sdk_sqs::Client, queue: &str, batches: usize) -> Result<f64, Failure> {
    rate(args, batches, |_| async move {
        let out = sqs.receive_message().queue_url(queue).max_number_of_messages(10).send().await?;
        let entries: Vec<DeleteMessageBatchRequestEntry> = out
            .messages()
            .iter()
            .enumerate()
            .filter_map(|(i, m)| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(m.receipt_handle().unwrap_or_default())
                    .build()
                    .ok()
            })
            .collect();
        if !entries.is_empty() {
            sqs.delete_message_batch().queue_url(queue).set_entries(Some(entries)).send().await?;
        }
        Ok(())
    })
    .await
}

/// Puts `count` copies of `body` on the queue, ten per `SendMessageBatch`.
async fn fill(sqs: &aws_sdk_sqs::Client, queue: &str, body: &str, count: usize) -> Result<(), Failure> {
    let batches: Vec<Result<(), Failure>> = futures::stream::iter((0..count).step_by(10))
        .map(|first| async move {
            let entries = (first..(first + 10).min(count))
                .map(|i| SendMessageBatchRequestEntry::builder().id(i.to_string()).message_body(body).build())
                .collect::<Result<Vec<_>, _>>()?;
            sqs.send_message_batch().queue_url(queue).set_entries(Some(entries)).send().await?;
            Ok(())
        })
        .buffer_unordered(16)
        .collect()
        .await;
    batches.into_iter().collect()
}
