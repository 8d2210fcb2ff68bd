//! grab: the sale's writes. A grab (below); and the function's other routes, which need the same
//! gate, queue and store, each in its room: a cancellation (`handlers::cancel`), the waitlist
//! (`handlers::waitlist`), a ballot's entry (`handlers::draws::entry`), a fair open's queue
//! (`handlers::draws::queue`) and the receipt keys (`handlers::draws::receipt_key`).
//!
//! A grab checks the verify hash (constant time, before Redis), runs the grab script, then sends
//! the order to SQS. A `202` promises the order is durable somewhere: in SQS, or, when the send
//! failed, in the outbox on a replica as well (`WAIT`); otherwise the reply is `503 BUSY`, the
//! entry stays in the outbox for reconcile, and the user's retry gets the same order.

use lambda_http::{Body, Request, Response, http::StatusCode};
use serde::Deserialize;
use serde_json::json;
use time::OffsetDateTime;

use crate::{
    amounts::Splits,
    config::{GrabPolicy, HashSettings, QueueSettings, UserLimits},
    delivery::{Courier, Delivery},
    domain::{
        EventId, Holding, OrderId, OrderStatus, UserId,
        event::{epoch_ms, rfc3339},
        order::MessageHead,
        order_seal::SealKey,
        sale_mode::SaleMode,
        window_count::WindowCounts,
    },
    gate::{Gate, GrabAttempt, GrabOutcome, GrabTally, HeldNow},
    give_back::GiveBacks,
    handlers::{
        cancel::Cancel,
        draws::{entry::Entries, queue::Queue, receipt_key::ReceiptKeys},
        limit::Limiter,
        waitlist::Waitlist,
    },
    http::{
        ApiError, Caller, json,
        reply::{endpoint, event_id, json_body},
        routes::Endpoint,
        serve,
    },
    queue::OrderQueue,
    recovery::{Rebuild, RebuildSettings, Rebuilder},
    secrets::StagedSecret,
    setup::Adapters,
    store::Store,
};

#[derive(Clone)]
pub struct Grab {
    gate: Gate,
    courier: Courier,
    store: Store,
    hash: HashSettings,
    policy: GrabPolicy,
    rebuilder: Rebuilder,
    /// The per-user limit of the rooms' routes (a grab's is the grab script's own).
    limiter: Limiter,
    cancel: Cancel,
    waitlist: Waitlist,
    entries: Entries,
    /// A fair open's queue (not the order queue, which the courier sends to).
    fair_queue: Queue,
    receipt_keys: ReceiptKeys,
    /// The outcomes this environment counts for the organiser's live page.
    tally: GrabTally,
    /// Red-packet amounts, each event's split computed once.
    splits: Splits,
    /// Refusals answered from the sold-out memory, which write no counter in Redis: counted here,
    /// against the grab script's own limit (`GRAB_RATE_LIMIT` per window).
    remembered_refusals: std::sync::Arc<WindowCounts<(EventId, UserId)>>,
}

/// The outcomes the live page's tally counts: what the gate decided for an event it knows (and a
/// granted order whose send failed, `BUSY`). A request refused before the gate (a bad hash or body,
/// an unknown event) would let anyone make keys for made-up events: of those, a forged hash
/// (`BAD_HASH`) is counted only for an event the gate has answered for here (`count_if_seen`).
const SALE_OUTCOMES: [&str; 9] = [
    "OK",
    "ALREADY",
    "SOLD_OUT",
    "RATE_LIMITED",
    "SALE_NOT_STARTED",
    "SALE_ENDED",
    "ORDER_CANCELLED",
    "BALLOT_ONLY",
    "BUSY",
];

/// A grab decided: the reply, and the order still to be sent when the grab was granted.
pub struct Decided {
    pub response: Response<Body>,
    /// The outcome's code (logs and metrics).
    pub code: &'static str,
    pub delivery: Option<Delivery>,
}

/// What DynamoDB says of the order a retry's holding names.
enum Stored {
    /// That order, stored, in this state.
    This(OrderStatus),
    /// Another order of the user: the holding was read from a cache since laid down without it.
    Another,
    /// None stored, or the read failed: the cache tells.
    Unknown,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GrabBody {
    hash: String,
}

impl Grab {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        gate: Gate,
        queue: OrderQueue,
        seal: StagedSecret<SealKey>,
        store: Store,
        hash: HashSettings,
        policy: GrabPolicy,
        rebuild: RebuildSettings,
        limits: UserLimits,
    ) -> Self {
        let rebuilder = Rebuilder::new(store.clone(), gate.clone(), queue.clone(), rebuild);
        let courier = Courier::new(gate.clone(), queue, seal);
        let returns = GiveBacks::new(gate.clone(), store.clone(), courier.clone());
        let limiter = Limiter::new(gate.clone(), limits);
        let cancel = Cancel::new(store.clone(), returns, rebuilder.clone());
        let waitlist =
            Waitlist::new(store.clone(), gate.clone(), courier.clone(), rebuilder.clone(), hash.keys.clone());
        let entries = Entries::new(store.clone(), rebuilder.clone(), hash.receipts.clone());
        let fair_queue = Queue::new(store.clone(), rebuilder.clone(), hash.keys.clone(), hash.receipts.clone());
        let receipt_keys = ReceiptKeys::new(store.clone(), rebuilder.clone(), hash.receipts.clone());
        let tally = GrabTally::new(gate.clone());
        Self {
            gate,
            courier,
            store,
            hash,
            policy,
            rebuilder,
            limiter,
            cancel,
            waitlist,
            entries,
            fair_queue,
            receipt_keys,
            tally,
            splits: Splits::default(),
            remembered_refusals: Default::default(),
        }
    }

    pub async fn from_env() -> Result<Self, super::StartError> {
        let adapters = Adapters::from_env().await;
        let queue = QueueSettings::from_env()?;
        let this = Self::new(
            adapters.gate_from_env().await?,
            adapters.grab_queue(&queue),
            crate::config::seal_keys(adapters.sdk()).await?,
            adapters.store_from_env()?,
            HashSettings::load(adapters.sdk()).await?,
            GrabPolicy::from_env()?,
            crate::config::RebuildSettings::from_env()?,
            UserLimits::from_env(crate::http::routes::per_user_limits())?,
        );
        // As verify-hash's: a provisioned environment reads its fleet's events before the open.
        if crate::setup::Init::from_env() == crate::setup::Init::Provisioned {
            this.warm_up().await;
        }
        Ok(this)
    }

    /// The events a warm fleet is kept for, made ready in this environment's memory before the
    /// open ([`super::warm_up`]): each event read from DynamoDB (a won grab's reply names a red
    /// packet's amount, from the event) and its buckets' layout from the cache (where a user's
    /// grab runs); and the sold-out memory's reader connected (else the whole fleet connects it
    /// at the sell-out). How many events are ready.
    pub async fn warm_up(&self) -> usize {
        let reader = async {
            match tokio::time::timeout(super::warm_up::WARM_UP_WITHIN, self.gate.connect_reader()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "the reader did not answer in init; the first sold-out refusal connects")
                }
                Err(_) => tracing::warn!("the reader did not answer in time; the first sold-out refusal connects"),
            }
        };
        let events = super::warm_up::warm_up(&self.gate, |event| async move {
            let read = self.splits.prepare(&self.rebuilder, &event).await;
            let laid = self.gate.buckets(&event).await;
            match (read, laid) {
                (Ok(found), Ok(_)) => found,
                (Err(e), _) => {
                    tracing::warn!(event_id = %event, error = %e, "a warm event could not be read; it is read at its first request");
                    false
                }
                (_, Err(e)) => {
                    tracing::warn!(event_id = %event, error = %e, "a warm event's buckets could not be read; they are read at its first request");
                    false
                }
            }
        });
        tokio::join!(reader, events).1
    }

    pub async fn handle(&self, req: Request) -> Response<Body> {
        serve("grab", req, |req| async move {
            if endpoint(&req) != Some(Endpoint::Grab) {
                return self.room(req).await;
            }
            let event = event_id(&req).ok();
            let answered = self.grab(req).await;
            let code = match &answered {
                Ok((_, code)) => code,
                Err(e) => e.code(),
            };
            if let Some(event) = event {
                let second = OffsetDateTime::now_utc().unix_timestamp();
                if SALE_OUTCOMES.contains(&code) {
                    self.tally.count(&event, code, second);
                } else if code == "BAD_HASH" {
                    self.tally.count_if_seen(&event, code, second);
                }
            }
            answered
        })
        .await
    }

    async fn grab(&self, req: Request) -> Result<(Response<Body>, &'static str), ApiError> {
        let decided = self.decide(req).await?;
        if let Some(order) = &decided.delivery
            && !self.deliver(order).await
        {
            return Err(ApiError::Busy);
        }
        Ok((decided.response, decided.code))
    }

    /// One request of the function's other routes, handed to its room once the caller is within
    /// their limit: the reply and its outcome code.
    async fn room(&self, req: Request) -> Result<(Response<Body>, &'static str), ApiError> {
        let caller = Caller::from_request(&req)?;
        let event = event_id(&req)?;
        self.limiter.admit(&req, &caller).await?;
        match endpoint(&req) {
            Some(Endpoint::Cancel) => self.cancel.cancel(&req, &event, &caller).await,
            Some(Endpoint::JoinWaitlist) => self.waitlist.join(&req, &event, &caller).await,
            Some(Endpoint::Waitlist) => self.waitlist.place(&event, &caller).await,
            Some(Endpoint::Enter) => self.entries.enter(&req, &event, &caller).await,
            Some(Endpoint::JoinQueue) => self.fair_queue.join(&req, &event, &caller).await,
            Some(Endpoint::QueuePlace) => self.fair_queue.place(&event, &caller).await,
            Some(Endpoint::ReceiptKey) => self.receipt_keys.published(&event).await,
            _ => Err(ApiError::RouteNotFound),
        }
    }

    /// The waitlist's room (tests play a join's steps apart).
    #[doc(hidden)]
    pub fn waitlist(&self) -> &Waitlist {
        &self.waitlist
    }

    /// The outcomes counted for the live page (tests write them at once with `flush`).
    pub fn tally(&self) -> &GrabTally {
        &self.tally
    }

    /// The decision alone: claims, verify hash, the grab script. A granted grab is durable in the
    /// outbox when this returns; [`Self::handle`] then sends it to SQS. Benchmarks time the two
    /// apart, since the send's cost is the queue's (the emulator's, locally).
    pub async fn decide(&self, req: Request) -> Result<Decided, ApiError> {
        let caller = Caller::from_request(&req)?;
        let event = event_id(&req)?;
        let body: GrabBody = json_body(&req)?;
        let now = OffsetDateTime::now_utc();
        self.hash
            .keys
            .check(|k| k.verify(&body.hash, &event, &caller.user, epoch_ms(now)))
            .await?
            .map_err(|_| ApiError::BadHash)?;
        let email = caller.verified_email()?;

        // An event this environment remembers sold out: the user's field, read on a replica,
        // answers; no script, no write (gate::sold_out).
        let (outcome, written) = match self.gate.refusal_without_script(&event, &caller.user).await {
            Some(outcome) => (self.counted(&event, &caller.user, outcome), None),
            None => {
                let grabbed = match self.run_script(&event, &caller, email, now).await {
                    Ok(grabbed) => grabbed,
                    Err(e) => {
                        // A renewal that failed: the next grab renews, not one past the grace.
                        self.gate.renewal_undecided(&event);
                        return Err(e);
                    }
                };
                match &grabbed.outcome {
                    GrabOutcome::SoldOut => self.gate.remember_sold_out(&event, &grabbed.written).await,
                    // Said before the script looks at the stock: nothing of sold out either way.
                    GrabOutcome::Already(_) | GrabOutcome::Cancelled(_) | GrabOutcome::RateLimited { .. } => {
                        self.gate.renewal_undecided(&event)
                    }
                    _ => self.gate.forget_sold_out(&event),
                }
                (grabbed.outcome, Some(grabbed.written))
            }
        };
        let code = outcome.code();
        match outcome {
            GrabOutcome::Granted { holding, message, generation } => {
                // A grant comes from the script, which wrote it on this connection.
                let Some(written) = written else { return Err(ApiError::Busy) };
                // No `remaining` here: the script does not count the stock (query serves it live).
                let mut reply = json!({ "order_id": holding.order, "ticket_no": holding.ticket_no, "status": OrderStatus::Pending });
                self.with_amount(&mut reply, &event, holding.ticket_no).await;
                let generation = Some(generation);
                let delivery = Some(Delivery { event, order_id: holding.order, message, written, generation });
                Ok(Decided { response: json(StatusCode::ACCEPTED, &reply), code, delivery })
            }
            GrabOutcome::Already(held) => {
                // The holding was read before the status (the script, or the sold-out memory's
                // replica), and a bucket lost meanwhile takes an order that was only in its outbox
                // (its first grab not yet kept): the retry names the order only once it knows the
                // order is this user's, stored, or still in their outbox (then delivered as the
                // first grab would have been: the retry's 200 is as much a promise as a 202, and a
                // second copy on the queue stores nothing twice). Otherwise 503: the next grab
                // decides afresh.
                let (status, delivery) = match self.stored_status(&event, &caller, &held, false).await {
                    Stored::This(status) => (status, None),
                    Stored::Another => {
                        return Err(self.not_named(&event, &held, "another order of the user is stored"));
                    }
                    Stored::Unknown => match self.gate.holding_now(&event, &caller.user, &held).await? {
                        HeldNow::InOutbox(message) => {
                            let written = match written {
                                Some(written) => written,
                                None => self.gate.written_at_home(&event, &caller.user).await?,
                            };
                            let order_id = held.order.clone();
                            let delivery =
                                Delivery { event: event.clone(), order_id, message, written, generation: None };
                            (OrderStatus::Pending, Some(delivery))
                        }
                        // Its entry gone: the consumer stored it (read again, consistently, to be
                        // sure: an entry also goes with a bucket's keys).
                        HeldNow::Stored => match self.stored_status(&event, &caller, &held, true).await {
                            Stored::This(status) => (status, None),
                            _ => return Err(self.not_named(&event, &held, "held, not in the outbox, not stored")),
                        },
                        HeldNow::NotHeld => {
                            return Err(self.not_named(&event, &held, "its holding went with its bucket"));
                        }
                    },
                };
                let mut reply = json!({ "order_id": held.order, "ticket_no": held.ticket_no, "status": status });
                self.with_amount(&mut reply, &event, held.ticket_no).await;
                Ok(Decided { response: json(StatusCode::OK, &reply), code, delivery })
            }
            GrabOutcome::Cancelled(_) => Err(ApiError::OrderCancelled),
            GrabOutcome::RateLimited { retry_after_ms } => Err(ApiError::RateLimited { retry_after_ms }),
            GrabOutcome::NotFound => Err(ApiError::EventNotFound),
            // Still stale right after a rebuild: a second failover meanwhile.
            GrabOutcome::Stale => Err(ApiError::Busy),
            // A ballot's window never opens: say why (the event is remembered per environment).
            GrabOutcome::NotStarted => match self.rebuilder.event(&event).await {
                Ok(Some(known)) if known.sale_mode == SaleMode::Ballot => Err(ApiError::BallotOnly),
                _ => Err(ApiError::SaleNotStarted),
            },
            GrabOutcome::Ended => Err(ApiError::SaleEnded),
            GrabOutcome::SoldOut => Err(ApiError::SoldOut),
        }
    }

    /// A refusal from the sold-out memory, counted as the script counts refusals: past the user's
    /// limit in the window, `RATE_LIMITED` instead (a holder's retry is never limited).
    fn counted(&self, event: &EventId, user: &UserId, outcome: GrabOutcome) -> GrabOutcome {
        if outcome != GrabOutcome::SoldOut {
            return outcome;
        }
        let (limit, window) = (self.policy.rate_limit, self.policy.rate_window);
        match self.remembered_refusals.count((event.clone(), user.clone()), limit, window, std::time::Instant::now()) {
            Some(wait) => GrabOutcome::RateLimited { retry_after_ms: wait.as_millis().max(1) as u64 },
            None => outcome,
        }
    }

    /// The grab script, with a fresh order id and the message head; on an event unknown to the
    /// cache or cached before a failover, the exact rebuild and the script again.
    async fn run_script(
        &self,
        event: &EventId,
        caller: &Caller,
        email: &crate::domain::Email,
        now: OffsetDateTime,
    ) -> Result<crate::gate::Grabbed, ApiError> {
        let order_id = OrderId::generate();
        let head = MessageHead::new(&order_id, event, &caller.user, email, &rfc3339(now));
        let attempt =
            GrabAttempt { event, user: &caller.user, order_id: &order_id, head: &head, clock_ms: epoch_ms(now) };
        let mut grabbed = self.gate.grab(&attempt, self.policy).await?;
        if matches!(grabbed.outcome, GrabOutcome::NotFound | GrabOutcome::Stale) {
            // Unknown, or a cache that was lost or written before a failover: DynamoDB knows which.
            // Rebuild once and retry.
            let known = self.rebuilder.event(event).await?.ok_or(ApiError::EventNotFound)?;
            match self.rebuilder.rebuild(&known).await? {
                Rebuild::Done | Rebuild::Present => grabbed = self.gate.grab(&attempt, self.policy).await?,
                Rebuild::Busy => return Err(ApiError::Busy),
                Rebuild::Ended => return Err(ApiError::SaleEnded),
            }
        }
        Ok(grabbed)
    }

    /// Sends the order to SQS; says whether the order is durable somewhere, so the user may be told
    /// `202`.
    pub async fn deliver(&self, order: &Delivery) -> bool {
        self.courier.deliver(order).await
    }

    /// A red packet's amount in the reply (after the script: the gate's cost is the same for
    /// every sale).
    async fn with_amount(&self, reply: &mut serde_json::Value, event: &EventId, ticket: crate::domain::TicketNo) {
        if let Some(amount) = self.splits.amount_of(&self.rebuilder, event, ticket).await {
            reply["amount"] = json!(amount);
        }
    }

    /// What DynamoDB holds of the user's order, as a retry naming `held` needs it: a consistent
    /// read when `now`. A read that fails knows nothing.
    async fn stored_status(&self, event: &EventId, caller: &Caller, held: &Holding, now: bool) -> Stored {
        let read = if now {
            self.store.get_order_now(event, &caller.user).await
        } else {
            self.store.get_order(event, &caller.user).await
        };
        match read {
            // `REJECTED` too: the user is told of it as it is (a late order a rebuild that went by
            // the queue left out), never of another.
            Ok(Some(order)) if order.order_id == held.order => Stored::This(order.status),
            Ok(Some(_)) => Stored::Another,
            Ok(None) => Stored::Unknown,
            Err(e) => {
                tracing::warn!(error = %e, "order status lookup failed; the cache is asked");
                Stored::Unknown
            }
        }
    }

    /// A retry's holding not named to its user (503): `why` is logged.
    fn not_named(&self, event: &EventId, held: &Holding, why: &str) -> ApiError {
        tracing::warn!(event_id = %event, order_id = %held.order, why, "a retry's holding is not named");
        ApiError::Busy
    }
}
