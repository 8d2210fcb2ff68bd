//! The Redis keys of one event and what their fields mean: the cache's layout, written once
//! (docs/DESIGN.md section 6). Every key carries a hash tag, so one script touches one cluster
//! slot: the event's `{<event id>}`, or for a sharded event one of its buckets' ([`Buckets`]).

use sha2::Digest;

use domain::{EventId, Holding, OrderId, TicketNo, UserId};

/// What an event's cache keys are tagged with: the event (an unsharded event, and bucket 0 of a
/// sharded one), or one bucket of a sharded event.
pub trait HashTag: std::fmt::Display {}
impl HashTag for EventId {}
impl HashTag for Bucket {}

/// One bucket of a sharded event (docs/DESIGN.md section 6, "Buckets"): a cache of its own (meta
/// with the event's fields and its home users' fields, seats with its share of the numbers, an
/// outbox), under its own hash tag. Bucket 0's tag is the event id itself, so an unsharded event's
/// keys are its bucket 0's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Bucket {
    tag: String,
    index: u16,
    /// The tag of the bucket's [`sent`] record, on another shard: an unsharded event's half the
    /// slot ring away; a sharded event's, the tag of the bucket half the buckets on
    /// ([`Buckets::of`]).
    sent_tag: String,
}

impl Bucket {
    pub fn index(&self) -> u16 {
        self.index
    }

    fn new(tag: String, index: u16) -> Self {
        Self { tag, index, sent_tag: String::new() }
    }
}

/// The first tag `name(s)` (s = 0, 1, ...) whose slot lies within [`SPREAD`] slots after `point` on
/// the ring: about 16,384 / `SPREAD` hashes; the bound (and `otherwise`) only guards the loop.
fn near(point: u32, name: impl Fn(u32) -> String, otherwise: String) -> String {
    let from = point % SLOTS;
    let within = |tag: &str| (u32::from(slot(tag)) + SLOTS - from) % SLOTS < SPREAD;
    (0..1_000_000).map(name).find(|tag| within(tag)).unwrap_or(otherwise)
}

impl std::fmt::Display for Bucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.tag)
    }
}

/// Redis Cluster's slots.
const SLOTS: u32 = 16_384;

/// How close to its point on the slot ring a bucket's tag lands (`Buckets::of`).
pub const SPREAD: u32 = 16;

/// The cluster slot of a hash tag, as Redis computes it (CRC16/XMODEM mod 16384).
pub fn slot(tag: &str) -> u16 {
    (u32::from(crc16::State::<crc16::XMODEM>::calculate(tag.as_bytes())) % SLOTS) as u16
}

/// A sharded event's buckets, and which one is each user's home. Cloned on every grab: shared,
/// not copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Buckets {
    all: std::sync::Arc<[Bucket]>,
}

impl Buckets {
    /// The `count` buckets of `event`. Bucket 0 is tagged with the event id; bucket k with
    /// `<event>#<k>.<s>`, the first `s` whose slot lies within [`SPREAD`] slots after the point k/count
    /// of the way round the slot ring from bucket 0's slot. The buckets so sit evenly round the ring,
    /// and a cluster whose masters own equal runs of slots (as `redis-cli --cluster create` and
    /// ElastiCache lay them out) holds `count` buckets on `count` different masters when it has that
    /// many (unless bucket 0's own slot lies within `SPREAD` slots of a run's end). Deterministic:
    /// every environment finds the same tags, at about 16,384 / `SPREAD` hashes each.
    pub fn of(event: &EventId, count: u16) -> Self {
        let count = count.clamp(1, domain::event::MAX_BUCKETS);
        let first = u32::from(slot(event.as_str()));
        let mut all = vec![Bucket::new(event.to_string(), 0)];
        for k in 1..count {
            let point = first + SLOTS * u32::from(k) / u32::from(count);
            let tag = near(point, |s| format!("{event}#{k}.{s}"), format!("{event}#{k}"));
            all.push(Bucket::new(tag, k));
        }
        // Each bucket's sent record in the very slot of the bucket half the buckets on: every
        // master then holds one bucket and one other bucket's record (a record placed apart could
        // share a master with another record, which would then pay two buckets' confirmations:
        // the sale's rate at that master's, docs/SCALE.md), and a record never shares its own
        // bucket's master.
        // An unsharded event's, half the slot ring away.
        let tags: Vec<String> = all.iter().map(|b| b.tag.clone()).collect();
        let half = usize::from(count).div_ceil(2);
        for (k, bucket) in all.iter_mut().enumerate() {
            bucket.sent_tag = if count > 1 {
                tags[(k + half) % tags.len()].clone()
            } else {
                near(first + SLOTS / 2, |s| format!("{event}~0.{s}"), format!("{event}~0"))
            };
        }
        Self { all: all.into() }
    }

    pub fn count(&self) -> u16 {
        self.all.len() as u16
    }

    pub fn is_sharded(&self) -> bool {
        self.all.len() > 1
    }

    /// Every bucket, bucket 0 first.
    pub fn iter(&self) -> std::slice::Iter<'_, Bucket> {
        self.all.iter()
    }

    pub fn get(&self, index: u16) -> Option<&Bucket> {
        self.all.get(usize::from(index))
    }

    /// The bucket that holds `user`'s field: the first 8 bytes of SHA-256 of the user id, mod the
    /// count (another hash than the slot's, so homes do not follow the tags' slots).
    pub fn home(&self, user: &UserId) -> &Bucket {
        let digest = sha2::Sha256::digest(user.as_str().as_bytes());
        let h = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
        &self.all[(h % self.all.len() as u64) as usize]
    }

    /// The bucket a free number is laid down in when the event is warmed or rebuilt:
    /// `(n - 1) mod count`, so each bucket starts with an equal share.
    pub fn shelf_of(&self, n: TicketNo) -> &Bucket {
        &self.all[((n.get().max(1) - 1) as usize) % self.all.len()]
    }
}

/// The version of the cache's layout: its keys and the meaning of meta's fields. It is part of the
/// opening field's name ([`opening`]), which every script reads first anyway, so a cache
/// written by another layout reads as not cached in this history, at no cost, and is rebuilt
/// from DynamoDB on first touch (at once: nothing of it was lost, see `Gate::layout_outdated`).
pub const LAYOUT_VERSION: &str = "v6";

/// What the meta hash's user fields mean, stored in meta itself (for a person reading the cache).
pub(super) const LAYOUT: &str = "v6: =<user> holds <order id>:<ticket no>, #<window end ms>:<refused count> or \
                      !<cancelled order id>; closed: the waitlist is closed; generation: the lay-down";

/// The event and its users, one hash: `capacity`, `start`, `end`, `cancel_until` (epoch ms),
/// `state`, `wait_max`, `closed` (the waitlist is closed), `buckets`, `generation` (which lay-down
/// of the cache this is: a fresh id at warming, the rebuild's token after a rebuild), [`ARRIVALS`], `layout`
/// (`LAYOUT`), the opening field ([`opening`]) and `open_until` (the span where the caller's clock
/// decides, in the scripts' time format), and one field per user ([`user_field`]).
pub fn meta(e: &impl HashTag) -> String {
    format!("ev:{{{e}}}:meta")
}
/// The meta field counting how many times numbers went on sale in this bucket after it was laid
/// down (a move's arrival, a number given back, a claim not taken in): a sharded grab answers
/// `SOLD_OUT` only if no bucket's count moved while it looked (docs/DESIGN.md section 6, "Sold
/// out"). The scripts that put numbers on sale name it as they name `generation`.
pub const ARRIVALS: &str = "arrivals";
/// The free ticket numbers.
pub fn seats(e: &impl HashTag) -> String {
    format!("ev:{{{e}}}:seats")
}
/// Order id -> order message, until DynamoDB holds the order.
pub fn outbox(e: &impl HashTag) -> String {
    format!("ev:{{{e}}}:outbox")
}
/// A bucket's sent record: order id -> order message, for every order of the bucket's outbox that
/// may be on the queue. Written before the message is sent (`sent.lua`, then `WAIT` for a replica),
/// removed once DynamoDB holds the order, like the outbox entry. Its tag puts it half the slot ring
/// from its bucket, on another shard: a bucket lost whole (outbox and all) leaves in its sent
/// record every order a user may have been told of, so the rebuild reads them there instead of
/// waiting for the queue (docs/DESIGN.md section 10). Beside the entries, the fields
/// [`SENT_LAID`], [`SENT_OPEN`] and [`SENT_STOP`].
pub fn sent(b: &Bucket) -> String {
    format!("ev:{{{}}}:sent:{}", b.sent_tag, b.index)
}
/// The sent record's field present since it was laid down (at warming, by a rebuild, or repaired
/// from its bucket's outbox): a record without it was lost, and cannot say what was sent.
pub const SENT_LAID: &str = "@laid";
/// The sent record's field naming the generation of its bucket whose orders it takes; absent while
/// a rebuild has it stopped.
pub const SENT_OPEN: &str = "@open";
/// The sent record's field naming the rebuild that stopped it last: only that rebuild opens it
/// again.
pub const SENT_STOP: &str = "@stop";
/// When the consumer of the orders queue `queue` last stored an order of any sale (unix ms; set at
/// most once a second per environment): an event whose orders wait while this moves is behind
/// other sales' orders on the shared queue, not stuck.
pub fn consumer_stored(queue: &str) -> String {
    format!("consumer:stored:{queue}")
}
/// The sent record's field `<replicas>:<replication id>`: the most replicas its server has had
/// connected while it held the record (`keep_sent.lua`). A replica gone since holds the earlier
/// orders and not the next, and may be the one promoted: the next are not confirmed until it is
/// back.
pub const SENT_REPLICAS: &str = "@replicas";
/// The user's field in `meta`, `=<user>` (the `=` keeps it apart from the event's own fields).
/// Its value is one of: [`holding`] (the user holds that order, or cancelled it and its number is
/// not given back yet), [`cancelled`] (`!<order id>`: no second ticket), or `#<window end
/// ms>:<count>` (refused grabs in the rate window, written by `grab.lua` only).
pub fn user_field(u: &UserId) -> String {
    format!("={u}")
}
/// One user's requests to one function (`query`, `verify-hash`) in the current window. Hashed on
/// the user, so a user's counters share a slot.
pub fn user_requests(u: &UserId, function: &str) -> String {
    format!("rl:{{{u}}}:{function}")
}
/// The meta field that says the event is cached in this server's history (the primary's
/// replication id, or in cluster mode the node's id, to 12 hex digits: `gate::link`) by this
/// layout ([`LAYOUT_VERSION`]): `open_from`, the start of the span where the caller's
/// clock decides, under a name carrying both. A cache from another history or layout lacks it
/// and reads as not cached, at no cost to the scripts, which read the field anyway.
pub fn opening(history: &str) -> String {
    format!("{}{history}", opening_prefix())
}
/// [`opening`] without its history: what a script is given in cluster mode, where it asks its
/// node for the history (a scripts' argument ending in `@`).
pub fn opening_prefix() -> String {
    format!("open_from@{}@", LAYOUT_VERSION)
}
/// The opening fields of the layouts before this one in `history` (v2 and v3 named it
/// `open_from@<history>`): such a cache is intact, only laid out otherwise.
pub fn older_openings(history: &str) -> [String; 1] {
    [format!("{OLDER_OPENING_PREFIX}{history}")]
}
/// [`older_openings`] before its history (`stop.lua` completes it with the node's).
pub const OLDER_OPENING_PREFIX: &str = "open_from@";
/// The waitlist: waiting user id -> place (a sorted set; the lowest place is served first).
pub fn wait(e: &impl HashTag) -> String {
    format!("ev:{{{e}}}:wait")
}
/// Waiting user id -> the head of the order message their promotion completes.
pub fn waiting(e: &impl HashTag) -> String {
    format!("ev:{{{e}}}:waiting")
}
/// Numbers returned after the sale's end while nobody waited: held for the next user who joins
/// the waitlist (until `cancel_until`; then unsold).
pub fn returned(e: &impl HashTag) -> String {
    format!("ev:{{{e}}}:returned")
}
/// At a bucket of a sharded event: move id -> `<generation>|<to bucket>|<ms>|<n>,<n>,...|<user>|<order>`,
/// numbers that left this bucket for another and have not arrived yet (`move_out.lua` writes it in
/// the step that takes them; the move's last step removes it). The user and order name a late
/// order's claim; a home refilled leaves them empty.
pub fn moving(e: &impl HashTag) -> String {
    format!("ev:{{{e}}}:moving")
}
/// At a bucket of a sharded event: move id -> generation, the moves whose numbers arrived here
/// (`move_in.lua`, or `admit.lua` for a claim), so a move asked again adds nothing twice. Kept
/// with the cache; a rebuild forgets it with every move.
pub fn moved(e: &impl HashTag) -> String {
    format!("ev:{{{e}}}:moved")
}
/// At a canceller's home bucket of a sharded event: cancelled order id -> its ticket number, while
/// the number is handed to the waitlist's line at bucket 0 (`let_go.lua` writes it with the
/// user's `!<order id>`; the give-back's last step removes it).
pub fn giving(e: &impl HashTag) -> String {
    format!("ev:{{{e}}}:giving")
}
/// At bucket 0 of a sharded event: hand id (the cancelled order's id, or a join's promotion id)
/// -> the promotion's order message while it is settled at its user's home, then `=`. Written in
/// the step that pops the line's head (or the returned number), so a hand asked again answers
/// the same.
pub fn handed(e: &impl HashTag) -> String {
    format!("ev:{{{e}}}:handed")
}
/// A record's id in [`handed`] for a join handed a returned number after the sale (a give-back's
/// is its cancelled order's id): reconcile settles these (`Gate::tidy_hands`); a give-back's is
/// driven by its marker.
pub fn joined_hand(promotion: &OrderId) -> String {
    format!("{JOINED_HAND}{promotion}")
}
const JOINED_HAND: &str = "join:";
/// Whether a record's id in [`handed`] is a join's ([`joined_hand`]).
pub fn is_joined_hand(id: &str) -> bool {
    id.starts_with(JOINED_HAND)
}
/// Everything a lost cache loses: what the grab script reads and writes, the waitlist, and a
/// sharded bucket's moves and hands under way.
pub fn cache(e: &impl HashTag) -> [String; 10] {
    [meta(e), seats(e), outbox(e), wait(e), waiting(e), returned(e), moving(e), moved(e), giving(e), handed(e)]
}
/// The grab outcomes counted in one minute of the event by the environments of one of its
/// [`TALLY_SHARDS`] shards (`<unix second>:<code>` -> count), for the organiser's live page:
/// written by the grab environments' tallies about once a second, read by `live` (every shard),
/// gone after [`TALLY_KEPT`]. Its hash tag is not the event's (`{tally:<event>:<shard>.<n>}`), so
/// it is no part of the cache ([`cache`]: a rebuild neither needs nor restores it); the shards'
/// tags are placed evenly round the slot ring, as a sharded event's buckets are ([`near`]), so in
/// cluster mode their writes spread over the masters (one key would put every grab environment's
/// writes on one master: 14,400 a second at the hot event, docs/SCALE.md).
pub fn grab_tally(e: &EventId, shard: u16, unix_minute: i64) -> String {
    format!("tally:{{{}}}:{unix_minute}", tally_tag(e, shard))
}

/// A tally shard's tag, found once per process: [`near`] hashes about a thousand candidates, and
/// every grab environment writes its tally each second.
fn tally_tag(e: &EventId, shard: u16) -> std::sync::Arc<str> {
    type Found = std::collections::HashMap<(EventId, u16), std::sync::Arc<str>>;
    static FOUND: std::sync::LazyLock<std::sync::Mutex<Found>> = std::sync::LazyLock::new(Default::default);
    let key = (e.clone(), shard);
    if let Some(tag) = FOUND.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return tag.clone();
    }
    let point = u32::from(slot(e.as_str())) + u32::from(shard) * (SLOTS / u32::from(TALLY_SHARDS));
    let tag: std::sync::Arc<str> =
        near(point, |n| format!("tally:{e}:{shard}.{n}"), format!("tally:{e}:{shard}")).into();
    let mut found = FOUND.lock().unwrap_or_else(|p| p.into_inner());
    // An environment sees a few events; a bound all the same.
    if found.len() >= 4_096 {
        found.clear();
    }
    found.insert(key, tag.clone());
    tag
}
/// How many keys an event's tally is spread over: as many as the buckets an event may have, so its
/// writes spread about as far as the sale's scripts.
pub const TALLY_SHARDS: u16 = domain::event::MAX_BUCKETS;
/// How long a minute's tally is kept.
pub const TALLY_KEPT: std::time::Duration = std::time::Duration::from_secs(15 * 60);
/// At each bucket: the token of the rebuild that stopped it last (`stop.lua`); only that rebuild
/// opens it again (`open.lua`).
pub fn stopped(e: &impl HashTag) -> String {
    format!("ev:{{{e}}}:stop")
}
/// A key of the cache as a rebuild lays it down before opening it: the live name with the
/// rebuild's token (same hash tag, so `open.lua` renames it in place).
pub fn staged(live: &str, token: &str) -> String {
    format!("{live}~{token}")
}
/// When the loss of the event's cache was first seen (epoch ms), while it is being rebuilt.
pub fn lost_since(e: &EventId) -> String {
    format!("ev:{{{e}}}:lost")
}
/// The events a warm fleet is kept for now (their ids, comma-separated), written by reconcile with
/// the fleet and kept a little past its window: a provisioned verify-hash environment reads each
/// at its init, minutes before the open, instead of all of them reading one item in its first
/// second.
pub const WARMING: &str = "fleet:warming";
/// Held by the reconcile run under way (its token), for at most its function's timeout: one run
/// at a time without a reserved concurrency of 1, which an account below 101 cannot give.
pub const RECONCILE_RUN: &str = "reconcile:run";
/// Set when the event's cache was last repaired (a part of it found lost while the rest was
/// there), for a while: repairs are spaced.
pub fn repaired(e: &EventId) -> String {
    format!("ev:{{{e}}}:repaired")
}
/// Set when reconcile last looked at the event's cache whole, for `RECONCILE_WHOLE_EVERY_SECONDS`.
pub fn looked_whole(e: &EventId) -> String {
    format!("ev:{{{e}}}:looked")
}
/// Reconcile's last finding that the cache lost part of itself (gate::waitlist, `found_again`).
pub fn suspected(e: &EventId) -> String {
    format!("ev:{{{e}}}:suspect")
}
/// The finding reconcile last repaired the cache for (a repair that did not mend it is not run
/// again for the same).
pub fn repaired_finding(e: &EventId) -> String {
    format!("ev:{{{e}}}:repaired-for")
}
/// Held while the event's cache is rebuilt from DynamoDB.
pub fn rebuild_lock(e: &EventId) -> String {
    format!("ev:{{{e}}}:lock")
}

/// A user's field when they hold an order (or cancelled it and its number is not given back yet):
/// `<order id>:<ticket no>`.
pub fn holding(h: &Holding) -> String {
    format!("{}:{}", h.order, h.ticket_no)
}

/// A user's field read back as what they hold; `None` when it is not a holding (a counter `#`, a
/// cancellation `!`, or anything malformed).
pub fn parse_holding(value: &str) -> Option<Holding> {
    let (order, ticket_no) = value.split_once(':')?;
    Some(Holding { order: OrderId::parse(order).ok()?, ticket_no: ticket_no.parse().ok()? })
}

/// A user's field once they cancelled `order`: `!<order id>` (no second ticket).
pub fn cancelled(order: &OrderId) -> String {
    format!("!{order}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sharded event's sent records lie in its buckets' own slots, one in each, never in its own
    /// bucket's: a master holding one bucket holds one record, whatever the slots' runs.
    #[test]
    fn each_sent_record_lies_in_another_buckets_slot_one_in_each() {
        let hash_slot = |key: &str| slot(&key[key.find('{').unwrap() + 1..key.find('}').unwrap()]);
        for count in [2u16, 3, 14, 16] {
            let buckets = Buckets::of(&EventId::parse("lecture-sent").unwrap(), count);
            let mut homes: Vec<u16> = buckets.iter().map(|b| slot(&b.tag)).collect();
            let mut records: Vec<u16> = buckets.iter().map(|b| hash_slot(&sent(b))).collect();
            for b in buckets.iter() {
                assert_ne!(hash_slot(&sent(b)), slot(&b.tag), "{count} buckets: bucket {} beside its record", b.index);
            }
            homes.sort_unstable();
            records.sort_unstable();
            assert_eq!(homes, records, "{count} buckets: one record in each bucket's slot");
        }
        let one = Buckets::of(&EventId::parse("lecture-sent").unwrap(), 1);
        let record = sent(one.get(0).unwrap());
        let apart = (u32::from(hash_slot(&record)) + SLOTS - u32::from(slot("lecture-sent"))) % SLOTS;
        assert!((SLOTS / 2..SLOTS / 2 + 2 * SPREAD).contains(&apart), "unsharded: half the ring away ({apart})");
    }

    #[test]
    fn a_tallys_shards_lie_evenly_round_the_slot_ring() {
        for id in ["lecture-1", "red-packets", "e"] {
            let event = EventId::parse(id).unwrap();
            let home = u32::from(slot(id));
            let mut arcs: Vec<u32> = (0..TALLY_SHARDS)
                .map(|shard| {
                    let key = grab_tally(&event, shard, 29_000_000);
                    let tag = &key[key.find('{').unwrap() + 1..key.find('}').unwrap()];
                    (u32::from(slot(tag)) + SLOTS - home) % SLOTS / (SLOTS / u32::from(TALLY_SHARDS))
                })
                .collect();
            arcs.dedup();
            assert_eq!(arcs, (0..u32::from(TALLY_SHARDS)).collect::<Vec<_>>(), "{id}: one shard in each sixteenth");
        }
    }

    #[test]
    fn slots_are_redis_clusters() {
        // `CLUSTER KEYSLOT` of these, asked of redis-server 7.
        assert_eq!(slot("foo"), 12182);
        assert_eq!(slot("bar"), 5061);
        assert_eq!(slot("123456789"), 12739);
    }

    #[test]
    fn buckets_sit_evenly_round_the_slot_ring_from_the_events_own_slot() {
        for (event, count) in [("lecture-1", 3), ("red-packets", 2), ("coupons", 16), ("x", 5)] {
            let id = EventId::parse(event).unwrap();
            let buckets = Buckets::of(&id, count);
            assert_eq!(buckets.count(), count);
            assert_eq!(buckets.get(0).unwrap().to_string(), event, "bucket 0 is the event's own tag");
            assert_eq!(meta(buckets.get(0).unwrap()), meta(&id));
            let first = u32::from(slot(event));
            for b in buckets.iter().skip(1) {
                let point = (first + SLOTS * u32::from(b.index()) / u32::from(count)) % SLOTS;
                let offset = (u32::from(slot(&b.to_string())) + SLOTS - point) % SLOTS;
                assert!(offset < SPREAD, "{b} lies just after its point");
                assert!(b.to_string().starts_with(&format!("{event}#{}.", b.index())));
            }
            assert_eq!(Buckets::of(&id, count), buckets, "every environment finds the same tags");
        }
        // Three masters of equal runs (as `redis-cli --cluster create` makes them): three buckets
        // of an event whose slot is not at a run's end land on three masters, and so do two.
        let master = |slot: u16| u32::from(slot) * 3 / SLOTS;
        for i in 0..200 {
            let id = EventId::parse(&format!("event-{i}")).unwrap();
            let edge = u32::from(slot(id.as_str())) % (SLOTS / 3);
            if !(SPREAD..SLOTS / 3 - SPREAD).contains(&edge) {
                continue;
            }
            for count in [2, 3] {
                let masters: std::collections::BTreeSet<u32> =
                    Buckets::of(&id, count).iter().map(|b| master(slot(&b.to_string()))).collect();
                assert_eq!(masters.len(), usize::from(count), "{id} over {count}");
            }
        }
    }

    #[test]
    fn homes_spread_evenly_and_numbers_start_in_equal_shares() {
        let buckets = Buckets::of(&EventId::parse("lecture").unwrap(), 3);
        let mut homes = [0u32; 3];
        for i in 0..30_000 {
            homes[usize::from(buckets.home(&UserId::parse(&format!("u{i}")).unwrap()).index())] += 1;
        }
        assert!(homes.iter().all(|&h| (9_500..10_500).contains(&h)), "{homes:?}");
        let user = UserId::parse("ada").unwrap();
        assert_eq!(buckets.home(&user), buckets.home(&user));
        let shelves: Vec<u16> = (1..=6).map(|n| buckets.shelf_of(TicketNo::new(n)).index()).collect();
        assert_eq!(shelves, [0, 1, 2, 0, 1, 2]);
        let one = Buckets::of(&EventId::parse("lecture").unwrap(), 1);
        assert!(!one.is_sharded());
        assert_eq!(one.home(&user).index(), 0);
    }
}
