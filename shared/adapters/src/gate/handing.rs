//! A sharded event's waitlist (docs/DESIGN.md section 6, "Buckets"): its line lives at bucket 0,
//! each user's field at their home, so a number goes to the line's head in steps that each touch
//! one bucket and may each be asked again:
//!
//! 1. `let_go.lua` at the canceller's home: their field becomes `!<order>`, the number is kept in
//!    `giving` (a give-back only; a join after the sale starts at step 2 in `wait.lua`);
//! 2. `hand.lua` at bucket 0: the line's head is popped and the promotion's whole message is
//!    recorded in `handed` in the same step (or, with nobody waiting, the number is on sale in
//!    bucket 0, or held in `returned` after the sale);
//! 3. `promote.lua` at the head's home: the holding and the outbox entry, as `give_back.lua`
//!    writes them unsharded, if the head holds nothing; if the head holds an order or cancelled
//!    one (neither ever goes back to nothing), step 2 again skipping them, the next head with an
//!    order id of its own;
//! 4. the record at bucket 0 is marked done (`handed.lua`), and the canceller's `giving` entry goes.
//!
//! Every step after the first is held to the generation step 1 read (the cache's lay-down): after
//! a rebuild, which laid everything down afresh, a step begun before it does nothing. A give-back
//! stopped between steps runs again from its marker (cancel, reconcile), and steps 1 and 2 answer
//! what they did before; two drivers of one marker promote one user, with one order. A join's
//! promotion stopped after step 2 is finished by reconcile from its record ([`Gate::tidy_hands`]).

use std::sync::LazyLock;

use super::{Gate, GateError, cache_script, keys, link::LinkConn, opening_arg};
use domain::{EventId, OrderId, OrderMessage, TicketNo, UserId, order::WaitHead};

static LET_GO_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(cache_script!("let_go.lua", opening = ARGV[5], lasting)));
static HAND_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(cache_script!("hand.lua", opening = ARGV[6], lasting)));
static PROMOTE_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(PROMOTE_SOURCE));
static HANDED_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(include_str!("handed.lua")));

/// The steps a test plays alone, as a process killed between them leaves them.
pub const LET_GO_SOURCE: &str = cache_script!("let_go.lua", opening = ARGV[5], lasting);
pub const HAND_SOURCE: &str = cache_script!("hand.lua", opening = ARGV[6], lasting);
pub const PROMOTE_SOURCE: &str = cache_script!("promote.lua", opening = ARGV[5]);

/// Where a number handed on to the line ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum HandedOn {
    /// The promotion is settled at its user's home (holding and outbox entry), now.
    Promoted {
        message: String,
        promoted: OrderMessage,
    },
    /// Settled before (the hand was asked again).
    Before,
    /// Nobody waited: on sale in bucket 0 (during the sale) or held in `returned` (after it).
    Freed,
    Returned,
    /// A step found its bucket not cached in this history: rebuild, then give back again.
    NotCached,
    /// The line and its heads disagree (a key of the line lost): repair, then give back again.
    LineLost,
}

/// One hand: its id in `handed`, the number, and what a promotion's message is made of.
pub(super) struct Hand<'a> {
    pub id: &'a str,
    pub ticket_no: TicketNo,
    /// The promotion id a newly popped head gets first (each head popped after a skip gets a
    /// fresh one), and when it was made.
    pub promotion: &'a OrderId,
    pub now: &'a str,
    /// When the number came back (epoch ms): at or after the sale's end, nobody waiting means
    /// `returned` rather than on sale.
    pub returned_ms: i64,
    /// The lay-down the give-back began in (`let_go.lua`, `wait.lua`).
    pub generation: &'a str,
}

impl Gate {
    /// Step 1 of a sharded give-back, at the canceller's home: `Some(Some(generation))` when the
    /// number is in hand (now or from an earlier try), in that lay-down; `Some(None)` when it was
    /// given back before; `None` when the home is not cached in this history.
    pub(super) async fn let_go(
        &self,
        conn: &mut LinkConn,
        home: &keys::Bucket,
        user: &UserId,
        holding: &domain::Holding,
    ) -> Result<Option<Option<String>>, GateError> {
        let reply: String = LET_GO_SCRIPT
            .key(keys::meta(home))
            .key(keys::giving(home))
            .arg(keys::user_field(user))
            .arg(keys::holding(holding))
            .arg(holding.order.as_str())
            .arg(holding.ticket_no.get())
            .arg(opening_arg(conn))
            .invoke_async(conn)
            .await?;
        match reply.split_once(':') {
            Some(("HAND", generation)) => Ok(Some(Some(generation.to_owned()))),
            _ => match reply.as_str() {
                "GONE" => Ok(Some(None)),
                "NOT_FOUND" | "STALE" => Ok(None),
                _ => Err(GateError::Protocol(format!("let_go reply {reply:?}"))),
            },
        }
    }

    /// Steps 2 to 4: hands the number to the line's first user who can take it (`found`: a record
    /// `wait.lua` already made for a joining user), settling the promotion at their home.
    pub(super) async fn hand_on(
        &self,
        conn: &mut LinkConn,
        buckets: &keys::Buckets,
        hand: &Hand<'_>,
        found: Option<String>,
    ) -> Result<HandedOn, GateError> {
        let line = buckets.get(0).expect("bucket 0");
        let mut skip = String::new();
        let mut record = found;
        let mut promotion = hand.promotion.clone();
        loop {
            let message = match record.take() {
                Some(message) => message,
                None => {
                    let reply: String = HAND_SCRIPT
                        .key(keys::meta(line))
                        .key(keys::wait(line))
                        .key(keys::waiting(line))
                        .key(keys::handed(line))
                        .key(keys::seats(line))
                        .key(keys::returned(line))
                        .arg(hand.id)
                        .arg(hand.ticket_no.get())
                        .arg(WaitHead::tail(&promotion, hand.now))
                        .arg(hand.returned_ms)
                        .arg(&skip)
                        .arg(opening_arg(conn))
                        .arg(hand.generation)
                        .invoke_async(conn)
                        .await?;
                    match reply.split_once(':') {
                        Some(("HEAD", message)) => message.to_owned(),
                        _ => {
                            return match reply.as_str() {
                                "FREED" => Ok(HandedOn::Freed),
                                "RETURNED" => Ok(HandedOn::Returned),
                                "GONE" => Ok(HandedOn::Before),
                                // Laid down again since: the marker drives the give-back afresh.
                                "NOT_FOUND" | "STALE" | "RELAID" => Ok(HandedOn::NotCached),
                                "LOST" => Ok(HandedOn::LineLost),
                                _ => Err(GateError::Protocol(format!("hand reply {reply:?}"))),
                            };
                        }
                    }
                }
            };
            let promoted = OrderMessage::parse(&message)
                .map_err(|e| GateError::Protocol(format!("a promotion's message: {e}")))?;
            let user = promoted.user_id.clone();
            let home = buckets.home(&user);
            let reply: String = PROMOTE_SCRIPT
                .key(keys::meta(home))
                .key(keys::outbox(home))
                .arg(keys::user_field(&user))
                .arg(promoted.order_id.as_str())
                .arg(promoted.ticket_no.get())
                .arg(&message)
                .arg(opening_arg(conn))
                .arg(hand.generation)
                .invoke_async(conn)
                .await?;
            let settled = match reply.as_str() {
                "PROMOTED" => HandedOn::Promoted { message: message.clone(), promoted },
                "ALREADY" => HandedOn::Before,
                // Laid down again since this give-back began: its marker drives it afresh.
                "NOT_FOUND" | "STALE" | "RELAID" => return Ok(HandedOn::NotCached),
                _ if reply.starts_with("SKIP:") => {
                    // The head holds an order or cancelled one, for good: the next head's turn,
                    // with an order of its own.
                    skip = message;
                    promotion = OrderId::generate();
                    continue;
                }
                _ => return Err(GateError::Protocol(format!("promote reply {reply:?}"))),
            };
            // Settled: the record is done, and the user (who holds the number) leaves the line.
            let _: u32 = HANDED_SCRIPT
                .key(keys::handed(line))
                .key(keys::wait(line))
                .key(keys::waiting(line))
                .arg(hand.id)
                .arg(&message)
                .arg(user.as_str())
                .invoke_async(conn)
                .await?;
            return Ok(settled);
        }
    }

    /// Reconcile's care of a sharded event's joins handed a returned number (nothing for an
    /// unsharded event): every record at bucket 0 older than `settle_age` whose id is its own
    /// promotion's (a give-back's records are driven by its marker instead) is settled, as the
    /// join would have. Returns how many it settled.
    pub async fn tidy_hands(&self, event: &EventId, settle_age: std::time::Duration) -> Result<u32, GateError> {
        let buckets = self.buckets(event).await?;
        if !buckets.is_sharded() {
            return Ok(0);
        }
        let line = buckets.get(0).expect("bucket 0");
        let mut conn = self.link.conn().await?;
        let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(&mut conn).await?;
        let now = secs * 1000 + micros / 1000;
        // The records and the lay-down they belong to, read together (one slot, one step).
        let (records, generation): (Vec<(String, String)>, Option<String>) = redis::pipe()
            .atomic()
            .hgetall(keys::handed(line))
            .hget(keys::meta(line), "generation")
            .query_async(&mut conn)
            .await?;
        let Some(generation) = generation else { return Ok(0) };
        let mut settled = 0;
        for (id, message) in records {
            let Ok(promoted) = OrderMessage::parse(&message) else { continue };
            let old = promoted.order_id.created_ms().is_none_or(|ms| ms <= now - settle_age.as_millis() as i64);
            if !keys::is_joined_hand(&id) || !old {
                continue;
            }
            let hand = Hand {
                id: &id,
                ticket_no: promoted.ticket_no,
                promotion: &OrderId::generate(),
                now: &promoted.created_at,
                // Handed after the sale (a join's returned number): with nobody else, returned again.
                returned_ms: now,
                generation: &generation,
            };
            if matches!(
                self.hand_on(&mut conn, &buckets, &hand, Some(message.clone())).await?,
                HandedOn::Promoted { .. }
            ) {
                settled += 1;
            }
        }
        Ok(settled)
    }
}
