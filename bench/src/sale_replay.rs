//! The sale's emulator calls and nothing else: what MiniStack allows for a red-packet sale, measured
//! in the pattern the sale makes them, so that loadgen's end-to-end figures stand beside a floor
//! measured the same way.
//!
//! Summing each call's rate measured alone misses what a sale does to one emulator process: its
//! receive and batch delete scan the whole queue (their cost grows with the queue's depth, which a
//! sale drives to tens of thousands), and the grabs' sends share the process with the consumer's
//! calls. So this replays the sale: `senders` in flight send `orders` sealed order messages
//! (grab's `SendMessage`, same body and seal), while `pollers` receive batches of 10 (the local
//! runner's event source mapping: long poll, every attribute) and, for each message, `concurrency`
//! at a time, make the consumer's calls with the product's own store and mailer (the order's
//! `TransactWriteItems`, the mail claim, SES `SendEmail` of a real confirmation with its pass,
//! the mail-sent update), then delete the batch. Nothing else runs between the calls: no seal
//! check, no cache, no outbox, no HTTP, no JWT.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, MessageSystemAttributeName};
use futures::StreamExt;
use shared::{
    domain::{Email, EventId, OrderId, OrderMessage, UserId, confirmation, order::MessageHead},
    mailer::Mailer,
    store::{Store, orders::MailClaim},
};
use time::OffsetDateTime;
use tokio::sync::Mutex;

use crate::Failure;

/// How the replay runs: the sale's shape.
pub struct Shape {
    pub orders: usize,
    pub senders: usize,
    pub pollers: usize,
    pub concurrency: usize,
    /// The consumer starts after the last send, as `loadgen --hold-mail` holds the runner's.
    pub held: bool,
}

/// What the replay measured.
#[derive(Debug, serde::Serialize)]
pub struct Replay {
    pub orders: usize,
    /// The consumer started after the sends.
    pub held: bool,
    /// First send to the last send's reply.
    pub send_seconds: f64,
    /// First send to the last order marked mailed: the drain's floor.
    pub drain_seconds: f64,
    pub receives: usize,
    pub empty_receives: usize,
    pub batch_deletes: usize,
    /// The deepest the queue got (sent, not yet deleted).
    pub max_depth: usize,
}

impl Replay {
    pub fn sends_per_s(&self) -> f64 {
        self.orders as f64 / self.send_seconds
    }

    pub fn print(&self) {
        println!(
            "sale replay{}: {} orders; sends done after {:.2} s ({:.0}/s), every order stored and mailed after {:.2} s \
             ({:.2} s after the last send)",
            if self.held { ", consumer held until the last send" } else { "" },
            self.orders,
            self.send_seconds,
            self.sends_per_s(),
            self.drain_seconds,
            self.drain_seconds - self.send_seconds
        );
        println!(
            "  {} receives ({} empty), {} batch deletes, queue at most {} deep; calls per order: 1 SendMessage, \
             1 TransactWriteItems, 2 UpdateItem, 1 SES SendEmail, {:.2} ReceiveMessage, {:.2} DeleteMessageBatch",
            self.receives,
            self.empty_receives,
            self.batch_deletes,
            self.max_depth,
            self.receives as f64 / self.orders as f64,
            self.batch_deletes as f64 / self.orders as f64
        );
    }
}

struct Counters {
    stored_and_mailed: AtomicUsize,
    sent: AtomicUsize,
    deleted: AtomicUsize,
    max_depth: AtomicUsize,
    receives: AtomicUsize,
    empty_receives: AtomicUsize,
    batch_deletes: AtomicUsize,
    last_mailed: Mutex<Option<Instant>>,
}

pub async fn run(settings: &local_runner::LocalSettings, shape: &Shape) -> Result<Replay, Failure> {
    let sdk = settings.sdk_config().await;
    let run = uuid::Uuid::now_v7().simple().to_string();
    let name = format!("replay-{run}");
    let ddb = aws_sdk_dynamodb::Client::new(&sdk);
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    local_runner::provision::ensure_table(&ddb, &name).await?;
    let (queue_url, _) = local_runner::provision::ensure_queues(&sqs, &name).await?;
    local_runner::provision::ensure_sender(&aws_sdk_sesv2::Client::new(&sdk), &settings.mail.from).await?;
    let store = Store::new(ddb.clone(), name.clone());
    let adapters = shared::setup::Adapters::new(sdk.clone());
    let mailer = adapters.mailer(&settings.mail, None);
    // Grab's client: its timeouts and retry, the runner's send budget.
    let queue = adapters.grab_queue(&shared::config::QueueSettings::for_queue(queue_url.clone())?);

    let now = OffsetDateTime::now_utc();
    let event = bench::sales::open_event(
        EventId::parse(&format!("replay-{}", &run[..12]))?,
        "sale replay",
        shape.orders as u32,
        now,
    );
    let created_at = shared::domain::event::rfc3339(now);
    let bodies: Vec<String> = (0..shape.orders)
        .map(|i| {
            let user = UserId::parse(&format!("replay-user-{i:06}"))?;
            let email = Email::parse(&format!("replay-{run}-{i}@example.com"))?;
            Ok(MessageHead::new(&OrderId::generate(), &event.id, &user, &email, &created_at)
                .complete(shared::domain::TicketNo::new(i as u32 + 1)))
        })
        .collect::<Result<_, Failure>>()?;
    // Every mail is the confirmation of the first order: the same size and parts for each, composed
    // once (its pass and QR code are our CPU, not the emulator's).
    let mail = confirmation::compose(&event, &OrderMessage::parse(&bodies[0])?, None, &settings.pass);

    let counters = Arc::new(Counters {
        stored_and_mailed: AtomicUsize::new(0),
        sent: AtomicUsize::new(0),
        deleted: AtomicUsize::new(0),
        max_depth: AtomicUsize::new(0),
        receives: AtomicUsize::new(0),
        empty_receives: AtomicUsize::new(0),
        batch_deletes: AtomicUsize::new(0),
        last_mailed: Mutex::new(None),
    });
    let started = Instant::now();
    // Held: the consumer starts once the last send is answered (`loadgen --hold-mail`).
    let mut consumers = if shape.held {
        Vec::new()
    } else {
        spawn_consumers(shape, &sqs, &queue_url, &store, &mailer, &mail, &counters)
    };
    let sends: Vec<Result<(), Failure>> = futures::stream::iter(bodies.iter())
        .map(|body| {
            let (queue, seal, counters) = (&queue, &settings.seal, &counters);
            async move {
                queue.send(body, seal).await?;
                let sent = counters.sent.fetch_add(1, Ordering::Relaxed) + 1;
                let depth = sent.saturating_sub(counters.deleted.load(Ordering::Relaxed));
                counters.max_depth.fetch_max(depth, Ordering::Relaxed);
                Ok(())
            }
        })
        .buffer_unordered(shape.senders)
        .collect()
        .await;
    let send_seconds = started.elapsed().as_secs_f64();
    sends.into_iter().collect::<Result<Vec<()>, _>>()?;
    if shape.held {
        consumers = spawn_consumers(shape, &sqs, &queue_url, &store, &mailer, &mail, &counters);
    }
    for consumer in consumers {
        consumer.await??;
    }
    let last = counters.last_mailed.lock().await.unwrap_or_else(Instant::now);
    let replay = Replay {
        orders: shape.orders,
        held: shape.held,
        send_seconds,
        drain_seconds: (last - started).as_secs_f64(),
        receives: counters.receives.load(Ordering::Relaxed),
        empty_receives: counters.empty_receives.load(Ordering::Relaxed),
        batch_deletes: counters.batch_deletes.load(Ordering::Relaxed),
        max_depth: counters.max_depth.load(Ordering::Relaxed),
    };
    sqs.delete_queue().queue_url(&queue_url).send().await?;
    ddb.delete_table().table_name(&name).send().await?;
    Ok(replay)
}

/// The consumer: `shape.pollers` pollers, each handling its batch `shape.concurrency` at a time,
/// until every order is stored and mailed.
fn spawn_consumers(
    shape: &Shape,
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    store: &Store,
    mailer: &Mailer,
    mail: &confirmation::Confirmation,
    counters: &Arc<Counters>,
) -> Vec<tokio::task::JoinHandle<Result<(), Failure>>> {
    (0..shape.pollers)
        .map(|_| {
            let (sqs, queue_url, store, mailer, mail, counters) =
                (sqs.clone(), queue_url.to_owned(), store.clone(), mailer.clone(), mail.clone(), counters.clone());
            let (orders, concurrency) = (shape.orders, shape.concurrency);
            tokio::spawn(async move {
                while counters.stored_and_mailed.load(Ordering::Relaxed) < orders {
                    let out = sqs
                        .receive_message()
                        .queue_url(&queue_url)
                        .max_number_of_messages(10)
                        .wait_time_seconds(1)
                        .message_system_attribute_names(MessageSystemAttributeName::All)
                        .message_attribute_names("All")
                        .send()
                        .await?;
                    counters.receives.fetch_add(1, Ordering::Relaxed);
                    let messages = out.messages.unwrap_or_default();
                    if messages.is_empty() {
                        counters.empty_receives.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    let work: Vec<_> = messages
                        .iter()
                        .map(|m| consume(&store, &mailer, &mail, m.body().unwrap_or_default(), &counters))
                        .collect();
                    let results: Vec<Result<(), Failure>> =
                        futures::stream::iter(work).buffer_unordered(concurrency).collect().await;
                    results.into_iter().collect::<Result<Vec<()>, _>>()?;
                    let entries: Vec<DeleteMessageBatchRequestEntry> = messages
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
                    sqs.delete_message_batch().queue_url(&queue_url).set_entries(Some(entries)).send().await?;
                    counters.batch_deletes.fetch_add(1, Ordering::Relaxed);
                    counters.deleted.fetch_add(messages.len(), Ordering::Relaxed);
                }
                Ok::<(), Failure>(())
            })
        })
        .collect()
}

/// The consumer's emulator calls for one message, in the product's order.
async fn consume(
    store: &Store,
    mailer: &Mailer,
    mail: &confirmation::Confirmation,
    body: &str,
    counters: &Counters,
) -> Result<(), Failure> {
    let order = OrderMessage::parse(body)?;
    let now = OffsetDateTime::now_utc();
    store.persist_order(&order, now).await?;
    match store.claim_mail(&order, now, now - Duration::from_secs(90)).await? {
        MailClaim::Claimed => {}
        // A message received twice (its visibility ran out under load): the mail is someone else's.
        _ => return Ok(()),
    }
    let id = mailer.send(order.email.as_str(), mail).await?;
    store.mark_mail_sent(&order, &id, OffsetDateTime::now_utc()).await?;
    counters.stored_and_mailed.fetch_add(1, Ordering::Relaxed);
    *counters.last_mailed.lock().await = Some(Instant::now());
    Ok(())
}
