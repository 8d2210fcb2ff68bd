//! mail: the SQS consumer. Each message the cache counts becomes a durable order in DynamoDB (one
//! conditional transaction), then exactly one confirmation through SES, then its outbox entry
//! leaves Redis.
//!
//! A batch is handled concurrently with a bound; the reply names only the messages that failed,
//! so SQS redelivers those alone and, after the redrive's receives, moves them to the DLQ.

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use futures::StreamExt;
use time::OffsetDateTime;
use tokio::sync::Mutex;
use tracing::Instrument;

use crate::{
    config::Publication,
    domain::{
        ClosedNotice, Event, EventId, OrderMessage, OrderStatus, QueueMessage, TicketNo, confirmation,
        order::BadMessage,
        order_seal::{BadSeal, SEAL_ATTRIBUTE, SealKey},
        ticket_pass::{PassKey, PassKeyRing},
    },
    gate::{Admitted, Gate},
    mailer::{MailError, Mailer},
    secrets::StagedSecret,
    setup::Adapters,
    store::{
        Store, StoreError,
        orders::{MailClaim, Persisted},
        waitlist::NoticeClaim,
    },
};

pub use crate::config::MailSettings;

/// Why one message could not be finished; SQS will deliver it again (and, if it never can be, move
/// it to the DLQ after the redrive's receives).
#[derive(Debug, thiserror::Error)]
pub enum MessageError {
    /// Not sealed by grab or reconcile: nothing is stored, nothing mailed.
    #[error("refused: {0}")]
    Unsealed(#[from] BadSeal),
    #[error(transparent)]
    Malformed(#[from] BadMessage),
    #[error("the order's event {0} is not stored")]
    UnknownEvent(String),
    #[error("ticket number {ticket_no} is outside the event's 1..{capacity}")]
    TicketOutOfRange { ticket_no: TicketNo, capacity: u32 },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Mail(#[from] MailError),
    #[error("another delivery is sending this order's mail")]
    MailInProgress,
    #[error(transparent)]
    Keys(#[from] crate::secrets::SecretError),
}

/// What invoked mail: the queue's batch, or an operator's `{"publish": "pass-keys"}` (a pass-key
/// rotation's runbook, docs/DEPLOY.md), which publishes the public pass keys and does nothing
/// else.
#[derive(Debug, Clone, PartialEq)]
pub enum MailTrigger {
    Batch(SqsEvent),
    PublishPassKeys,
}

impl MailTrigger {
    pub fn parse(payload: serde_json::Value) -> Result<Self, super::reconcile::BadTrigger> {
        if payload
            .as_object()
            .is_some_and(|o| o.len() == 1 && o.get("publish").and_then(|v| v.as_str()) == Some("pass-keys"))
        {
            return Ok(Self::PublishPassKeys);
        }
        if payload.get("Records").is_none() {
            return Err(super::reconcile::BadTrigger::new(
                "mail takes the queue's batch or {\"publish\": \"pass-keys\"}".to_owned(),
            ));
        }
        serde_json::from_value(payload)
            .map(Self::Batch)
            .map_err(|e| super::reconcile::BadTrigger::new(format!("not an SQS batch: {e}")))
    }
}

/// Sends of one mail tried at once when each certainly did not go out.
const CERTAIN_FAILURE_TRIES: u64 = 3;
/// How long one order's send waits out SES's rate before it counts as a failed delivery: within
/// the function's 30 s with a batch's sends at once.
const THROTTLE_PATIENCE: Duration = Duration::from_secs(10);
const THROTTLE_FIRST_WAIT: Duration = Duration::from_millis(100);
const THROTTLE_LONGEST_WAIT: Duration = Duration::from_secs(2);

/// What became of one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handled {
    /// Stored `CONFIRMED` and its mail sent.
    ConfirmedAndMailed,
    /// Already stored and mailed: nothing to do.
    AlreadyDone,
    /// Stored `REJECTED`: the ticket number was held by another order.
    Rejected,
    /// A second order for the same user: dropped.
    DroppedSecondOrder,
    /// A closing notice sent to a user who waited.
    NoticeSent,
    /// An order the cache never counted and could not take in (its send reached the queue after
    /// the grab gave up and after the cache was rebuilt without it): dropped, nothing stored.
    DroppedUncounted,
}

impl Handled {
    /// The outcome's name in logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ConfirmedAndMailed => "CONFIRMED_AND_MAILED",
            Self::AlreadyDone => "ALREADY_DONE",
            Self::Rejected => "REJECTED",
            Self::DroppedSecondOrder => "DROPPED_SECOND_ORDER",
            Self::NoticeSent => "NOTICE_SENT",
            Self::DroppedUncounted => "DROPPED_UNCOUNTED",
        }
    }
}

#[derive(Clone)]
pub struct Mail {
    store: Store,
    gate: Gate,
    mailer: Mailer,
    /// Checks each message's seal before anything is written (any staged order key).
    seal: StagedSecret<SealKey>,
    /// Signs the ticket pass each confirmation carries (the current pass key); the public halves of
    /// its stages are published for the doors ([`Self::publish_pass_keys`]).
    pass: StagedSecret<PassKey>,
    /// The public pass keys this environment last found published (or published itself).
    published: Arc<Mutex<Option<PassKeyRing>>>,
    /// The secret the public pass keys are published in, and the SDK that writes it.
    publish_to: Option<(aws_config::SdkConfig, String)>,
    settings: MailSettings,
    /// Events never change after release, so each is read once per execution environment.
    events: Arc<Mutex<HashMap<EventId, Arc<Event>>>>,
    /// Red-packet amounts, each event's split computed once.
    splits: crate::amounts::Splits,
    /// When this environment last said it stored an order (unix ms): said at most once a second.
    noted: Arc<std::sync::atomic::AtomicI64>,
    /// The queue this consumer reads (its records' source), once a batch named it.
    queue: Arc<std::sync::OnceLock<String>>,
}

impl Mail {
    pub fn new(
        store: Store,
        gate: Gate,
        mailer: Mailer,
        seal: StagedSecret<SealKey>,
        pass: StagedSecret<PassKey>,
        settings: MailSettings,
    ) -> Self {
        let (events, splits, published, noted, queue) = Default::default();
        Self { store, gate, mailer, seal, pass, published, publish_to: None, settings, events, splits, noted, queue }
    }

    pub async fn from_env() -> Result<Self, super::StartError> {
        let settings = MailSettings::from_env()?;
        let adapters = Adapters::from_env().await;
        let sdk = adapters.sdk();
        let mail = Self::new(
            adapters.store_from_env()?,
            adapters.gate_from_env().await?,
            adapters.mailer(&settings, None),
            crate::config::seal_keys(sdk).await?,
            crate::config::pass_keys(sdk).await?,
            settings,
        )
        .publishing_to(sdk);
        // A failure is logged: orders are stored and mailed all the same, and the next batch
        // publishes again.
        if let Err(e) = mail.publish_pass_keys(false).await {
            tracing::error!(error = %e, "the public pass keys could not be published");
        }
        Ok(mail)
    }

    /// Where [`Self::publish_pass_keys`] writes: the secret `PASS_PUBLIC_KEYS_ARN` names (unset:
    /// nowhere, as locally).
    fn publishing_to(mut self, sdk: &aws_config::SdkConfig) -> Self {
        self.publish_to =
            crate::settings::PASS_PUBLIC_KEYS_ARN.optional().map(|arn| (sdk.clone(), arn.trim().to_owned()));
        self
    }

    /// The doors and the pass-key route learn the public halves from here (only mail holds the
    /// private key): the public half of each staged pass key (current, pending as `next`,
    /// previous), written when it differs from what is published. Run at cold start, before each
    /// batch (after a rotation's step is read) and when invoked with `{"publish": "pass-keys"}`
    /// (the rotation's runbook). Returns what it did (`None`: nowhere to publish).
    /// `fresh`: the pass key's stages read now, not as last read (the runbook's invocation).
    pub async fn publish_pass_keys(&self, fresh: bool) -> Result<Option<Publication>, crate::config::ConfigError> {
        let Some((sdk, arn)) = &self.publish_to else { return Ok(None) };
        let unreadable = |e: crate::secrets::SecretError| crate::config::ConfigError::SecretUnreadable {
            name: "PASS_KEY_ARN",
            reason: e.to_string(),
        };
        // Never from a view served stale: an environment frozen since would publish a ring older
        // than the one others published, and the doors would refuse the newest passes.
        let keys = if fresh { self.pass.read_now().await } else { self.pass.fresh().await }.map_err(unreadable)?;
        let ring = PassKeyRing::of(&keys);
        let mut published = self.published.lock().await;
        if published.as_ref() == Some(&ring) {
            return Ok(Some(Publication::AlreadyPublished));
        }
        let done = crate::config::publish_pass_keys_to(sdk, arn, &ring, keys.read_ms).await?;
        // Keys read later stand: this environment asks again once its own view is read again.
        if done != Publication::LaterPublished {
            *published = Some(ring);
        }
        Ok(Some(done))
    }

    /// One invocation: a batch's reply (the failed messages), or what a publication did.
    pub async fn handle(&self, trigger: MailTrigger) -> serde_json::Value {
        match trigger {
            MailTrigger::Batch(batch) => serde_json::to_value(self.handle_batch(batch).await).unwrap_or_default(),
            MailTrigger::PublishPassKeys => match self.publish_pass_keys(true).await {
                // `declined`: keys read later than this invocation's are published (a clock
                // behind another environment's); the runbook stops on it rather than promote.
                Ok(done) => serde_json::json!({
                    "published": done == Some(Publication::Written),
                    "declined": done == Some(Publication::LaterPublished),
                }),
                Err(e) => {
                    tracing::error!(error = %e, "the public pass keys could not be published");
                    serde_json::json!({ "published": false, "error": "BUSY" })
                }
            },
        }
    }

    /// One SQS batch: every message concurrently (bounded); the failed ones, and only those, are
    /// named in the reply.
    pub async fn handle_batch(&self, batch: SqsEvent) -> SqsBatchResponse {
        if let Err(e) = self.publish_pass_keys(false).await {
            tracing::error!(error = %e, "the public pass keys could not be published");
        }
        if let Some(name) =
            batch.records.first().and_then(|r| r.event_source_arn.as_deref()).and_then(|a| a.rsplit(':').next())
        {
            let _ = self.queue.set(name.to_owned());
        }
        let failures: Vec<BatchItemFailure> = futures::stream::iter(batch.records)
            .map(|record| self.handle_record(record))
            .buffer_unordered(self.settings.concurrency)
            .filter_map(|failed| async move { failed })
            .map(|id| {
                let mut failure = BatchItemFailure::default();
                failure.item_identifier = id;
                failure
            })
            .collect()
            .await;
        let mut response = SqsBatchResponse::default();
        response.batch_item_failures = failures;
        response
    }

    /// Says an order was stored (at most once a second per environment): the organiser tells an
    /// event waiting behind other sales' orders from a consumer that stopped. Best effort.
    async fn note_stored(&self, now: OffsetDateTime) {
        use std::sync::atomic::Ordering;
        let Some(queue) = self.queue.get() else { return };
        let at_ms = crate::domain::event::epoch_ms(now);
        let last = self.noted.load(Ordering::Relaxed);
        if at_ms - last < 1_000
            || self.noted.compare_exchange(last, at_ms, Ordering::Relaxed, Ordering::Relaxed).is_err()
        {
            return;
        }
        if let Err(e) = self.gate.note_stored(queue, at_ms).await {
            tracing::debug!(error = %e, "the consumer's last store not noted");
        }
    }

    /// The message id when the message failed.
    async fn handle_record(&self, record: SqsMessage) -> Option<String> {
        let id = record.message_id.clone().unwrap_or_default();
        let span = tracing::info_span!("message", message_id = %id);
        let started = std::time::Instant::now();
        let seal = record.message_attributes.get(SEAL_ATTRIBUTE).and_then(|a| a.string_value.as_deref());
        let result = self.handle_message(record.body.as_deref().unwrap_or_default(), seal).instrument(span).await;
        let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
        match result {
            Ok(outcome) => {
                tracing::info!(message_id = %id, outcome = ?outcome, latency_ms, "message handled");
                crate::metrics::outcome("mail", outcome.as_str(), latency_ms);
                None
            }
            Err(e) => {
                tracing::warn!(message_id = %id, error = %e, latency_ms, "message failed; SQS will deliver it again");
                crate::metrics::outcome("mail", "FAILED", latency_ms);
                Some(id)
            }
        }
    }

    /// One message: its seal and its order checked, then persist, mail once, clear the outbox
    /// entry. A message that fails a check writes nothing.
    pub async fn handle_message(&self, body: &str, seal: Option<&str>) -> Result<Handled, MessageError> {
        self.seal.check(|k| k.check(body, seal)).await??;
        let order = match QueueMessage::parse(body)? {
            QueueMessage::Order(order) => order,
            QueueMessage::WaitlistClosed(notice) => return self.notice_once(&notice).await,
        };
        let event = self.event(&order.event_id).await?;
        if order.ticket_no.get() > event.capacity {
            return Err(MessageError::TicketOutOfRange { ticket_no: order.ticket_no, capacity: event.capacity });
        }
        let now = OffsetDateTime::now_utc();
        let persisted = match self.admit(&order).await {
            Admitted::Counted | Admitted::Adopted | Admitted::NotCached => {
                self.store.persist_order(&order, now).await?
            }
            Admitted::Taken => self.store.reject(&order, None, now).await?,
            Admitted::Uncounted => {
                self.clear_outbox(&order).await;
                return Ok(Handled::DroppedUncounted);
            }
        };
        // Durable from here on: the outbox entry has done its job whatever happens next.
        self.clear_outbox(&order).await;
        self.note_stored(now).await;
        match persisted {
            Persisted::Confirmed | Persisted::Redelivered { status: OrderStatus::Confirmed, .. } => {
                self.mail_once(&order, &event, now).await
            }
            Persisted::Redelivered { .. } => Ok(Handled::AlreadyDone),
            Persisted::SecondOrder { existing } => {
                tracing::warn!(
                    order_id = %order.order_id, existing_order_id = %existing, event_id = %order.event_id, user_id = %order.user_id,
                    "second order for a user dropped (the cache drifted)"
                );
                Ok(Handled::DroppedSecondOrder)
            }
            Persisted::Rejected { held_by } => {
                tracing::warn!(
                    order_id = %order.order_id, held_by = ?held_by.as_ref().map(|o| o.as_str()), ticket_no = %order.ticket_no, event_id = %order.event_id,
                    "order rejected: its ticket number is held by another order (the cache drifted)"
                );
                Ok(Handled::Rejected)
            }
        }
    }

    async fn mail_once(
        &self,
        order: &OrderMessage,
        event: &Event,
        now: OffsetDateTime,
    ) -> Result<Handled, MessageError> {
        let stale_before = now - self.settings.claim_timeout;
        match self.store.claim_mail(order, now, stale_before).await? {
            MailClaim::Claimed => {}
            MailClaim::AlreadySent | MailClaim::NotDue => return Ok(Handled::AlreadyDone),
            MailClaim::InProgress => return Err(MessageError::MailInProgress),
        }
        let amount = self.splits.amount(event, order.ticket_no);
        let mail = confirmation::compose(event, order, amount.as_ref(), &self.pass.get().await?.current);
        let mut refusals = 0;
        let (mut throttles, mut throttled_since) = (0u32, None);
        loop {
            match self.send_once(order, &mail).await {
                Ok(message_id) => {
                    self.store.mark_mail_sent(order, &message_id, OffsetDateTime::now_utc()).await?;
                    return Ok(Handled::ConfirmedAndMailed);
                }
                // SES's rate per second: waited out here, backing off, for up to THROTTLE_PATIENCE,
                // not counted as a refusal (a drain faster than the account's rate would otherwise
                // send its confirmations to the DLQ after five deliveries).
                Err(e @ MailError::Throttled(_))
                    if throttled_since.get_or_insert_with(Instant::now).elapsed() < THROTTLE_PATIENCE =>
                {
                    throttles += 1;
                    let wait = (THROTTLE_FIRST_WAIT * 2u32.saturating_pow(throttles.min(4))).min(THROTTLE_LONGEST_WAIT);
                    tracing::warn!(order_id = %order.order_id, error = %e, wait_ms = wait.as_millis() as u64, "mail throttled; sent again after a wait");
                    tokio::time::sleep(wait).await;
                    continue;
                }
                // Certainly not sent: at once again, a few times, then the claim goes back so the
                // redelivery sends without waiting for it to go stale.
                Err(e) if e.certainly_not_sent() => {
                    refusals += 1;
                    if refusals < CERTAIN_FAILURE_TRIES {
                        tracing::warn!(order_id = %order.order_id, error = %e, "mail not sent; trying again");
                        tokio::time::sleep(std::time::Duration::from_millis(100 * refusals)).await;
                        continue;
                    }
                    self.store.release_mail_claim(order).await?;
                    return Err(e.into());
                }
                // Maybe sent: the claim stays until it goes stale, so no delivery sends it again
                // before then (RELIABILITY.md: the one window for a second mail).
                Err(e) => {
                    tracing::error!(order_id = %order.order_id, error = %e, "mail send unanswered; the claim is kept until it goes stale");
                    return Err(e.into());
                }
            }
        }
    }

    /// The waitlist's closing notice, once per user: claimed on the user's place as an order's
    /// mail is on the order (the same rules for a send that is certainly not sent or unanswered).
    async fn notice_once(&self, notice: &ClosedNotice) -> Result<Handled, MessageError> {
        let event = self.event(&notice.event_id).await?;
        let now = OffsetDateTime::now_utc();
        let (e, u) = (&notice.event_id, &notice.user_id);
        match self.store.claim_notice(e, u, now, now - self.settings.claim_timeout).await? {
            NoticeClaim::Claimed => {}
            NoticeClaim::Done => return Ok(Handled::AlreadyDone),
            NoticeClaim::InProgress => return Err(MessageError::MailInProgress),
        }
        let mail = confirmation::waitlist_closed(&event);
        match self.mailer.send(notice.email.as_str(), &mail).await {
            Ok(message_id) => {
                self.store.notice_sent(e, u, &message_id, OffsetDateTime::now_utc()).await?;
                Ok(Handled::NoticeSent)
            }
            Err(err) => {
                if err.certainly_not_sent() {
                    self.store.release_notice(e, u).await?;
                }
                Err(err.into())
            }
        }
    }

    /// One send, waited for up to the send timeout. Unanswered past the patience, it is counted
    /// (on the order and in the `MailUnanswered` metric) and still waited for: a late answer that
    /// says the mail went out settles it, with no second send.
    async fn send_once(&self, order: &OrderMessage, mail: &confirmation::Confirmation) -> Result<String, MailError> {
        let send = self.mailer.send(order.email.as_str(), mail);
        tokio::pin!(send);
        tokio::select! {
            sent = &mut send => return sent,
            () = tokio::time::sleep(self.settings.send_patience) => {}
        }
        tracing::warn!(order_id = %order.order_id, patience_ms = self.settings.send_patience.as_millis() as u64, "mail send unanswered past the patience; still waiting");
        crate::metrics::counts("mail", &[("MailUnanswered", 1)]);
        if let Err(e) = self.store.mark_mail_unanswered(order, OffsetDateTime::now_utc()).await {
            tracing::warn!(order_id = %order.order_id, error = %e, "unanswered send not recorded on the order");
        }
        send.await
    }

    async fn event(&self, id: &EventId) -> Result<Arc<Event>, MessageError> {
        if let Some(event) = self.events.lock().await.get(id) {
            return Ok(event.clone());
        }
        let stored = self.store.get_event(id).await?.ok_or_else(|| MessageError::UnknownEvent(id.to_string()))?;
        let event = Arc::new(stored.event);
        self.events.lock().await.insert(id.clone(), event.clone());
        Ok(event)
    }

    /// What the cache says of the order before it is stored. Every order a user was told of is
    /// counted (the grab script, a promotion or a rebuild wrote its holding) unless it reached the
    /// queue after a rebuild that did not wait for it (`admit.lua`): then the cache decides, so a
    /// number it sold again is not taken from the user told `202` for it. Without an answer
    /// (Redis unreachable) the order is stored as before the check: DynamoDB's conditions still
    /// refuse a second holder.
    async fn admit(&self, order: &OrderMessage) -> Admitted {
        let admitted = self.gate.admit(order).await.unwrap_or_else(|e| {
            tracing::warn!(order_id = %order.order_id, error = %e, "the cache could not be asked; the order is stored");
            Admitted::NotCached
        });
        let said = match admitted {
            Admitted::Counted | Admitted::NotCached => return admitted,
            Admitted::Adopted => "order taken into the cache: it arrived after a rebuild and its number was free",
            Admitted::Taken => "order rejected: it arrived after a rebuild that sold its number again",
            Admitted::Uncounted => "order dropped: it arrived after a rebuild and its user holds another order",
        };
        tracing::warn!(order_id = %order.order_id, event_id = %order.event_id, ticket_no = %order.ticket_no, "{said}");
        admitted
    }

    /// Best effort: reconcile removes what is left.
    async fn clear_outbox(&self, order: &OrderMessage) {
        if let Err(e) = self.gate.remove_from_outbox(&order.event_id, Some(&order.user_id), &order.order_id).await {
            tracing::warn!(order_id = %order.order_id, error = %e, "outbox entry left for reconcile");
        }
    }
}
