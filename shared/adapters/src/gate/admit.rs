//! The consumer's question before it stores an order: does the cache count it? (`admit.lua`)

use std::sync::LazyLock;

use redis::AsyncCommands;

use super::{
    Gate, GateError, cache_script, keys,
    link::LinkConn,
    moves::{Move, MoveOut, Moved},
};
use domain::{Holding, OrderMessage, UserId};

/// The consumer's question as Redis runs it (the tests that play a second consumer run it too).
pub const ADMIT_SOURCE: &str = cache_script!("admit.lua", opening = ARGV[4], lasting);
static ADMIT_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(ADMIT_SOURCE));

/// What the cache says of an order about to be stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admitted {
    /// The user holds this order (or cancelled it): store it.
    Counted,
    /// The cache never counted it, but the user held nothing and its number was free: both are
    /// the order's now. Store it.
    Adopted,
    /// The cache never counted it, the user held nothing, and its number went to someone else:
    /// store it `REJECTED` so its user learns. The user's field names it now (as a rebuild names
    /// a rejected order), so their retry is told of it rather than given a second order.
    Taken,
    /// The user holds another order: do not store this one.
    Uncounted,
    /// No cache of this history to ask (lost, before a failover, or expired after the sale): store
    /// it, as before any check; a rebuild waits for the queue to drain and counts it.
    NotCached,
}

/// How often a late order's number, free nowhere, is looked for again after the moves under way
/// were finished.
const CLAIM_ROUNDS: usize = 4;

/// What a claim's arrival at home came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ClaimIn {
    Admitted(Admitted),
    /// Home is not cached in this history: the rebuild to come counts the order.
    NotCached,
    /// Home was laid down again since the claim began: the claim moved nothing; ask afresh.
    Gone,
}

/// What `admit.lua` answered.
enum Answer {
    Decided(Admitted),
    /// ("look") The user holds nothing and the number is not free at home.
    Elsewhere,
    /// ("claimed") Home was laid down again since the claim began.
    Gone,
}

/// How `admit.lua` is asked at the user's home.
enum Step<'a> {
    /// Decide here alone (an unsharded event).
    Here,
    /// A sharded event: the number not free here may be free elsewhere; answer ELSEWHERE.
    Look,
    /// The number arrives here for this order by the move `id` of `generation`.
    Claimed { id: &'a str, generation: &'a str },
}

impl Gate {
    /// Asks the cache whether it counts `order`, taking it in when it can: one script, or on a
    /// sharded event, when the number is not free at the user's home, a claim of it in the bucket
    /// where it is free (a move of that very number, `move_out.lua`) and the script again at home.
    pub async fn admit(&self, order: &OrderMessage) -> Result<Admitted, GateError> {
        // A claim overtaken by a rebuild (which laid its number down afresh) asks again, once or twice.
        for _ in 0..3 {
            if let Some(admitted) = self.admit_once(order).await? {
                return Ok(admitted);
            }
        }
        Ok(Admitted::NotCached)
    }

    async fn admit_once(&self, order: &OrderMessage) -> Result<Option<Admitted>, GateError> {
        let buckets = self.buckets(&order.event_id).await?;
        let home = buckets.home(&order.user_id);
        let mut conn = self.link.conn().await?;
        let holding = order.holding();
        if !buckets.is_sharded() {
            return decided(self.admit_at(&mut conn, home, &order.user_id, &holding, Step::Here).await?).map(Some);
        }
        // Free nowhere while moves are under way may be free on their arrival: they are finished
        // and the number looked for again, a few times while the sale moves numbers about.
        for _ in 0..CLAIM_ROUNDS {
            if let Answer::Decided(admitted) =
                self.admit_at(&mut conn, home, &order.user_id, &holding, Step::Look).await?
            {
                return Ok(Some(admitted));
            }
            for bucket in buckets.iter().filter(|b| *b != home) {
                // A fresh id each claim: a number taken twice for one order (two consumers of its
                // message) arrives twice, and the second goes on sale at home (admit.lua).
                let id = uuid::Uuid::now_v7().to_string();
                let claim = Some((&order.user_id, &order.order_id, order.ticket_no));
                let moving = match self.move_out(&mut conn, bucket, &id, home.index(), claim).await? {
                    MoveOut::Moving(moving) => moving,
                    MoveOut::Empty => continue,
                    MoveOut::NotCached => return Ok(Some(Admitted::NotCached)),
                };
                return Ok(match self.claim_in(&mut conn, &buckets, bucket, &id, &moving).await? {
                    ClaimIn::Admitted(admitted) => Some(admitted),
                    ClaimIn::NotCached => Some(Admitted::NotCached),
                    ClaimIn::Gone => None,
                });
            }
            let finished = self.finish_moves(&mut conn, &buckets, i64::MAX).await?;
            // A move that cannot arrive (a bucket lost or laid down again): the rebuild to come
            // counts the order.
            if finished.not_cached > 0 {
                return Ok(Some(Admitted::NotCached));
            }
            if finished.arrived == 0 {
                break;
            }
        }
        decided(self.admit_at(&mut conn, home, &order.user_id, &holding, Step::Here).await?).map(Some)
    }

    /// A claim's last steps: the number arrives at its user's home for the order (`admit.lua`,
    /// once: taken in, or on sale there when the user holds another order), then the record leaves
    /// `from`.
    pub(super) async fn claim_in(
        &self,
        conn: &mut LinkConn,
        buckets: &super::keys::Buckets,
        from: &keys::Bucket,
        id: &str,
        moving: &Move,
    ) -> Result<ClaimIn, GateError> {
        let (Some((user, order)), [n]) = (&moving.claim, moving.numbers.as_slice()) else {
            return Err(GateError::Protocol(format!("a claim's record {moving:?}")));
        };
        let home = buckets.home(user);
        let holding = Holding { order: order.clone(), ticket_no: *n };
        let step = Step::Claimed { id, generation: &moving.generation };
        let admitted = match self.admit_at(conn, home, user, &holding, step).await? {
            Answer::Decided(Admitted::NotCached) => return Ok(ClaimIn::NotCached),
            Answer::Decided(admitted) => admitted,
            Answer::Gone => return Ok(ClaimIn::Gone),
            Answer::Elsewhere => return Err(GateError::Protocol("admit answered ELSEWHERE to a claim".into())),
        };
        let _: u32 = conn.hdel(keys::moving(from), id).await?;
        Ok(ClaimIn::Admitted(admitted))
    }

    /// `admit.lua` at the user's home, at `step`.
    async fn admit_at(
        &self,
        conn: &mut LinkConn,
        home: &keys::Bucket,
        user: &UserId,
        holding: &Holding,
        step: Step<'_>,
    ) -> Result<Answer, GateError> {
        let opening = super::opening_arg(conn);
        let mut call = ADMIT_SCRIPT.key(keys::meta(home));
        call.key(keys::seats(home))
            .key(keys::moved(home))
            .arg(keys::user_field(user))
            .arg(keys::holding(holding))
            .arg(holding.ticket_no.get())
            .arg(opening);
        match step {
            Step::Here => call.arg(""),
            Step::Look => call.arg("look"),
            Step::Claimed { id, generation } => call.arg("claimed").arg(id).arg(generation),
        };
        let reply: String = call.invoke_async(conn).await?;
        Ok(Answer::Decided(match reply.as_str() {
            "COUNTED" => Admitted::Counted,
            "ADOPTED" => Admitted::Adopted,
            "TAKEN" => Admitted::Taken,
            "UNCOUNTED" => Admitted::Uncounted,
            "NOT_FOUND" | "STALE" => Admitted::NotCached,
            "ELSEWHERE" => return Ok(Answer::Elsewhere),
            "GONE" => return Ok(Answer::Gone),
            _ => return Err(GateError::Protocol(format!("admit reply {reply:?}"))),
        }))
    }
}

impl Gate {
    /// Finishes every move under way whose numbers left before `before_ms` (any move: `i64::MAX`),
    /// over every bucket (here, beside the claims: a claim's arrival is this room's script): safe at any moment, each move's numbers arriving once. A grab finds no
    /// number anywhere, or a late order's number nowhere free, only after this found nothing to
    /// finish: numbers on their way are not sold out. Returns how many it finished, and how many
    /// could not be (a bucket not cached in this history, or laid down again since).
    pub(super) async fn finish_moves(
        &self,
        conn: &mut LinkConn,
        buckets: &keys::Buckets,
        before_ms: i64,
    ) -> Result<MovesFinished, GateError> {
        let mut finished = MovesFinished::default();
        for from in buckets.iter() {
            let mut cursor = 0u64;
            loop {
                let (next, page): (u64, Vec<(String, String)>) = redis::cmd("HSCAN")
                    .arg(keys::moving(from))
                    .arg(cursor)
                    .arg("COUNT")
                    .arg(200)
                    .query_async(conn)
                    .await?;
                for (id, record) in page {
                    let Some(moving) = Move::parse(&record) else {
                        tracing::warn!(record, "a move's record is malformed; left as it is");
                        continue;
                    };
                    if moving.at_ms > before_ms {
                        continue;
                    }
                    let arrived = match &moving.claim {
                        None => matches!(self.move_in(conn, buckets, from, &id, &moving).await?, Moved::Arrived(_)),
                        Some(_) => matches!(
                            self.claim_in(conn, buckets, from, &id, &moving).await?,
                            super::admit::ClaimIn::Admitted(_)
                        ),
                    };
                    if arrived {
                        finished.arrived += 1;
                    } else {
                        finished.not_cached += 1;
                    }
                }
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        Ok(finished)
    }
}

/// What finishing the moves under way did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct MovesFinished {
    /// Moves whose numbers are now on sale (or taken in, for a claim), now or before.
    pub arrived: u32,
    /// Moves that could not arrive: a bucket not cached in this history, or laid down again
    /// since the move began (its numbers were laid down afresh by the rebuild).
    pub not_cached: u32,
}

/// An answer of a step that decides (only "look" answers ELSEWHERE, only "claimed" GONE).
fn decided(answer: Answer) -> Result<Admitted, GateError> {
    match answer {
        Answer::Decided(admitted) => Ok(admitted),
        _ => Err(GateError::Protocol("admit answered ELSEWHERE or GONE to a step that decides".into())),
    }
}
