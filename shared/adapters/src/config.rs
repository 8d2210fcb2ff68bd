//! Typed settings, read once per execution environment (cold start).
//!
//! Each function reads only the settings it needs, so a missing variable stops exactly the cold
//! starts that would have used it, with a message naming the variable.

use std::{env, str::FromStr, time::Duration};

use crate::{
    secrets::StagedSecret,
    settings::{self, Variable},
};
use domain::{
    entry_receipt::ReceiptKey,
    key_rotation::Staged,
    order_seal::SealKey,
    ticket_pass::{PassKey, PassKeyRing, PublicPassKey},
    verify_hash::HashKey,
};

pub use crate::settings::ConfigError;

/// How long an order may wait to be stored, nothing stored meanwhile, before the organiser's audit
/// fails (`ORDER_STUCK_AFTER_SECONDS`, by default [`domain::audit::ORDER_STUCK_AFTER`]).
pub fn order_stuck_after() -> Result<Duration, ConfigError> {
    let seconds: u64 = settings::ORDER_STUCK_AFTER_SECONDS.read()?;
    if seconds == 0 {
        return Err(ConfigError::Malformed { name: "ORDER_STUCK_AFTER_SECONDS", reason: "must be positive".into() });
    }
    Ok(Duration::from_secs(seconds))
}

/// The beacon chains a draw may name: drand's quicknet, pinned in the code, and the deployment's
/// own when `BEACON_CHAIN` names one (`name,public key hex,genesis unix seconds,period seconds`).
pub fn beacon_chains() -> Result<Vec<domain::beacon::Chain>, ConfigError> {
    let mut chains = vec![domain::beacon::quicknet()];
    if let Some(spec) = settings::BEACON_CHAIN.optional() {
        let chain = domain::beacon::Chain::parse(&spec)
            .map_err(|reason| ConfigError::Malformed { name: "BEACON_CHAIN", reason })?;
        chains.push(chain);
    }
    Ok(chains)
}

/// A variable read as text, `default` when unset or blank.
pub fn text_or(name: &'static str, default: &str) -> String {
    env::var(name).ok().filter(|v| !v.trim().is_empty()).unwrap_or_else(|| default.to_owned())
}

/// A variable that must be set (and not blank).
pub fn required(name: &'static str) -> Result<String, ConfigError> {
    match env::var(name) {
        Ok(v) if !v.trim().is_empty() => Ok(v),
        _ => Err(ConfigError::Missing(name)),
    }
}

/// A variable read as `T`, `default` when unset or blank; a malformed value is an error naming it.
pub fn parsed_or<T: FromStr>(name: &'static str, default: T) -> Result<T, ConfigError>
where
    T::Err: std::fmt::Display,
{
    match env::var(name) {
        Ok(v) if !v.trim().is_empty() => {
            v.trim().parse().map_err(|e: T::Err| ConfigError::Malformed { name, reason: e.to_string() })
        }
        _ => Ok(default),
    }
}

/// Where the tables live.
#[derive(Debug, Clone)]
pub struct StoreSettings {
    pub table_name: String,
}

impl StoreSettings {
    pub fn from_env() -> Result<Self, ConfigError> {
        Ok(Self { table_name: settings::TABLE_NAME.required()? })
    }
}

/// The orders queue.
#[derive(Debug, Clone)]
pub struct QueueSettings {
    pub orders_queue_url: String,
    /// Grab's budget for one send, both attempts together (`GRAB_SEND_BUDGET_MS`): a grab that
    /// holds a ticket answers fast; an order whose send fails waits in the outbox for reconcile.
    pub grab_send_budget: Duration,
    /// The orders queue's dead-letter queue (`DEAD_LETTERS_QUEUE_URL`): reconcile moves its
    /// messages back when an operator asks; only reconcile is given it.
    pub dead_letters_queue_url: Option<String>,
}

impl QueueSettings {
    pub fn from_env() -> Result<Self, ConfigError> {
        let mut settings = Self::for_queue(settings::ORDERS_QUEUE_URL.required()?)?;
        settings.dead_letters_queue_url = settings::DEAD_LETTERS_QUEUE_URL.optional();
        Ok(settings)
    }

    /// The settings of the queue at `url` (the local runner's, which it provisions itself).
    pub fn for_queue(url: String) -> Result<Self, ConfigError> {
        Ok(Self {
            orders_queue_url: url,
            grab_send_budget: Duration::from_millis(settings::GRAB_SEND_BUDGET_MS.read()?),
            dead_letters_queue_url: None,
        })
    }
}

/// The Redis gate. Timeouts are short on purpose: a grab that cannot reach Redis answers
/// `503 BUSY` quickly instead of piling up behind a dead connection.
#[derive(Debug, Clone)]
pub struct GateSettings {
    /// The primary endpoint, or in cluster mode the configuration endpoint.
    pub redis_url: String,
    /// A Redis Cluster (ElastiCache cluster mode enabled): each event's keys live on their slot's shard.
    pub cluster: bool,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
    /// How long a grab whose send failed waits for a replica to hold its outbox entry (`WAIT`)
    /// before answering `503 BUSY` instead of `202`.
    pub replica_wait: Duration,
    /// The cache's AUTH token: deployed, the secret `REDIS_AUTH_SECRET_ARN` names (ElastiCache's
    /// AuthToken); locally `REDIS_AUTH_TOKEN` (the local stack's `requirepass`). Never logged.
    pub auth_token: Option<String>,
    /// Where a refusal of a sold-out event reads the user's field (`REDIS_READER_URL`): the reader
    /// endpoint (a replica), or in cluster mode the configuration endpoint again (reads go to each
    /// slot's replicas). Unset: the primary.
    pub reader_url: Option<String>,
    /// How long a grab environment remembers an event sold out, for each of its buckets
    /// (`SOLD_OUT_MEMORY_MS`, 1,000; 0:
    /// never): meanwhile its grabs of that event run no script (docs/DESIGN.md section 6).
    pub sold_out_memory: Duration,
    /// In cluster mode, how long the reader keeps one map of the slots' replicas
    /// (`REDIS_READER_REFRESH_MS`, 600,000): then it reads the cluster's slots again in the
    /// background, so a replica added since serves the refusals too. Each reading is a new
    /// connection to every node, TLS handshakes included: not more often.
    pub reader_refresh: Duration,
}

impl GateSettings {
    /// [`Self::from_env`], with the AUTH token read from Secrets Manager when the deployment names one.
    pub async fn load(sdk: &aws_config::SdkConfig) -> Result<Self, ConfigError> {
        let mut settings = Self::from_env()?;
        if let Some(arn) = settings::REDIS_AUTH_SECRET_ARN.optional() {
            let token = crate::secrets::read(sdk, arn.trim())
                .await
                .map_err(|e| ConfigError::SecretUnreadable { name: "REDIS_AUTH_SECRET_ARN", reason: e.to_string() })?;
            settings.auth_token = Some(token);
        }
        Ok(settings)
    }

    pub fn from_env() -> Result<Self, ConfigError> {
        Self::for_url(settings::REDIS_URL.required()?)
    }

    /// The settings of the cache at `redis_url`, every other value from the environment (the
    /// local runner's, whose `REDIS_URL` has a default).
    pub fn for_url(redis_url: String) -> Result<Self, ConfigError> {
        if !(redis_url.starts_with("redis://") || redis_url.starts_with("rediss://")) {
            return Err(ConfigError::Malformed {
                name: "REDIS_URL",
                reason: "must start with redis:// or rediss://".into(),
            });
        }
        Ok(Self {
            redis_url,
            cluster: settings::REDIS_CLUSTER.read()?,
            connect_timeout: Duration::from_millis(settings::REDIS_CONNECT_TIMEOUT_MS.read()?),
            command_timeout: Duration::from_millis(settings::REDIS_COMMAND_TIMEOUT_MS.read()?),
            replica_wait: Duration::from_millis(settings::REDIS_REPLICA_WAIT_MS.read()?),
            auth_token: settings::REDIS_AUTH_TOKEN.optional(),
            reader_url: match settings::REDIS_READER_URL.optional() {
                Some(url) if !(url.starts_with("redis://") || url.starts_with("rediss://")) => {
                    return Err(ConfigError::Malformed {
                        name: "REDIS_READER_URL",
                        reason: "must start with redis:// or rediss://".into(),
                    });
                }
                url => url,
            },
            sold_out_memory: Duration::from_millis(settings::SOLD_OUT_MEMORY_MS.read()?),
            reader_refresh: Duration::from_millis(settings::REDIS_READER_REFRESH_MS.read()?),
        })
    }
}

/// The grab gate's policy.
#[derive(Debug, Clone, Copy)]
pub struct GrabPolicy {
    /// Requests one user may make for one event within `rate_window`.
    pub rate_limit: u32,
    pub rate_window: Duration,
}

impl GrabPolicy {
    /// Refused grabs per user per event per window when `GRAB_RATE_LIMIT` is unset.
    pub const DEFAULT_RATE_LIMIT: u32 = settings::GRAB_RATE_LIMIT.default;

    pub fn from_env() -> Result<Self, ConfigError> {
        let policy = Self {
            rate_limit: settings::GRAB_RATE_LIMIT.read()?,
            rate_window: Duration::from_millis(settings::GRAB_RATE_WINDOW_MS.read()?),
        };
        if policy.rate_limit == 0 || policy.rate_window.is_zero() {
            return Err(ConfigError::Malformed {
                name: "GRAB_RATE_LIMIT",
                reason: "rate limit and window must be positive".into(),
            });
        }
        Ok(policy)
    }
}

/// One user's budget on one route: requests per window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserLimit {
    pub requests: u32,
    pub window: Duration,
}

/// Requests one user may make to each route per window, counted in Redis (`handlers::limit`) so a
/// flood from one valid token is refused before it costs anything else. The routes, their
/// settings and defaults are listed once, in the route table (`http::routes`); the window is the
/// grab script's (`GRAB_RATE_WINDOW_MS`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserLimits {
    pub window: Duration,
    per_route: std::collections::BTreeMap<&'static str, u32>,
}

impl UserLimits {
    /// `limits` are the route table's (name, setting, default).
    pub fn from_env(limits: impl Iterator<Item = (&'static str, &'static str, u32)>) -> Result<Self, ConfigError> {
        let window = Duration::from_millis(settings::GRAB_RATE_WINDOW_MS.read()?);
        let mut per_route = std::collections::BTreeMap::new();
        for (name, setting, default) in limits {
            let requests = parsed_or(setting, default)?;
            if requests == 0 {
                return Err(ConfigError::Malformed { name: setting, reason: "must be positive".into() });
            }
            per_route.insert(name, requests);
        }
        if window.is_zero() {
            return Err(ConfigError::Malformed { name: "GRAB_RATE_WINDOW_MS", reason: "must be positive".into() });
        }
        Ok(Self { window, per_route })
    }

    /// The budget of the route counted as `name` (a name the table does not list is not limited).
    pub fn of(&self, name: &str) -> Option<UserLimit> {
        self.per_route.get(name).map(|&requests| UserLimit { requests, window: self.window })
    }
}

impl Default for GrabPolicy {
    fn default() -> Self {
        Self { rate_limit: 5, rate_window: Duration::from_secs(1) }
    }
}

/// The verify hash: its key (issued with the current one, any staged one accepted), lifetime and
/// how early before the sale it can be had; and the entry receipts' key
/// (`domain::entry_receipt`), a key pair of its own derived from the same deployment secret under
/// its own label, so it rotates with it and no other right is needed to hold it.
#[derive(Clone)]
pub struct HashSettings {
    pub keys: StagedSecret<domain::verify_hash::HashKey>,
    /// Read when first asked for (an entry): verify-hash, which never signs one, never reads it.
    pub receipts: StagedSecret<ReceiptKey>,
    pub ttl: Duration,
    pub open_margin: Duration,
}

impl HashSettings {
    /// The key from `HASH_SECRET_ARN` (Secrets Manager: what a deployment sets, its stages read
    /// again within [`secrets_kept`]) or else from `HASH_SECRET` (a development value).
    pub async fn load(sdk: &aws_config::SdkConfig) -> Result<Self, ConfigError> {
        let keys =
            rotating(sdk, settings::HASH_SECRET_ARN, settings::HASH_SECRET, |s| HashKey::new(s.as_bytes())).await?;
        Self::with_keys(keys, receipt_keys(sdk)?)
    }

    /// The settings around a key already in hand (the local runner's development secret).
    pub fn with_secret(secret: &str) -> Result<Self, ConfigError> {
        let key = HashKey::new(secret.as_bytes())
            .map_err(|reason| ConfigError::Malformed { name: "HASH_SECRET", reason: reason.into() })?;
        Self::with_keys(StagedSecret::fixed(Staged::only(key)), StagedSecret::fixed(Staged::only(receipt_key(secret)?)))
    }

    fn with_keys(keys: StagedSecret<HashKey>, receipts: StagedSecret<ReceiptKey>) -> Result<Self, ConfigError> {
        Ok(Self {
            keys,
            receipts,
            ttl: Duration::from_secs(settings::HASH_TTL_SECONDS.read()?),
            open_margin: Duration::from_secs(settings::HASH_OPEN_MARGIN_SECONDS.read()?),
        })
    }
}

/// The entry receipts' keys alone, read when first asked for: grab signs with them, release
/// commits an event's to their public halves (docs/FAIRNESS.md section 6a).
pub fn receipt_keys(sdk: &aws_config::SdkConfig) -> Result<StagedSecret<ReceiptKey>, ConfigError> {
    Ok(match settings::HASH_SECRET_ARN.optional() {
        Some(arn) => StagedSecret::secret(sdk, arn.trim(), |s| ReceiptKey::new(s.as_bytes()), secrets_kept()?),
        None => StagedSecret::fixed(Staged::only(receipt_key(&settings::HASH_SECRET.required()?)?)),
    })
}

fn receipt_key(secret: &str) -> Result<ReceiptKey, ConfigError> {
    ReceiptKey::new(secret.as_bytes())
        .map_err(|reason| ConfigError::Malformed { name: "HASH_SECRET", reason: reason.into() })
}

impl std::fmt::Debug for HashSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HashSettings")
            .field("keys", &self.keys)
            .field("ttl", &self.ttl)
            .field("open_margin", &self.open_margin)
            .finish()
    }
}

/// The key that seals order messages (`domain::order_seal`), held by the functions that send
/// orders (grab, release, reconcile) and mail, which checks them: from `ORDER_KEY_ARN` (Secrets
/// Manager: what a deployment sets, its stages read again within [`secrets_kept`]) or else
/// `ORDER_KEY` (a development value). A key of its own, not the verify hash's, so verify-hash
/// (which holds that one) cannot forge an order.
pub async fn seal_keys(sdk: &aws_config::SdkConfig) -> Result<StagedSecret<SealKey>, ConfigError> {
    rotating(sdk, settings::ORDER_KEY_ARN, settings::ORDER_KEY, |s| SealKey::new(s.as_bytes())).await
}

/// The pass key from `PASS_KEY_ARN` (Secrets Manager, its stages read again within
/// [`secrets_kept`]) or else `PASS_KEY` (a development value).
pub async fn pass_keys(sdk: &aws_config::SdkConfig) -> Result<StagedSecret<PassKey>, ConfigError> {
    rotating(sdk, settings::PASS_KEY_ARN, settings::PASS_KEY, |s| PassKey::new(s.as_bytes())).await
}

/// How long an environment keeps a rotating key's stages before it reads them again
/// (`SECRETS_KEPT_SECONDS`, 60): the least wait between a rotation's two steps (docs/DEPLOY.md,
/// "Rotating keys").
pub fn secrets_kept() -> Result<Duration, ConfigError> {
    Ok(Duration::from_secs(settings::SECRETS_KEPT_SECONDS.read()?))
}

/// A rotating key: the secret `arn_var` names, read now (a cold start fails on an unreadable one)
/// and again within [`secrets_kept`], or else the development value `dev_var`, fixed.
async fn rotating<K: Send + Sync + 'static>(
    sdk: &aws_config::SdkConfig,
    arn_var: Variable,
    dev_var: Variable,
    parse: fn(&str) -> Result<K, &'static str>,
) -> Result<StagedSecret<K>, ConfigError> {
    match arn_var.optional() {
        Some(arn) => {
            let keys = StagedSecret::secret(sdk, arn.trim(), parse, secrets_kept()?);
            keys.get()
                .await
                .map_err(|e| ConfigError::SecretUnreadable { name: arn_var.name, reason: e.to_string() })?;
            Ok(keys)
        }
        None => {
            let key = parse(&dev_var.required()?)
                .map_err(|reason| ConfigError::Malformed { name: dev_var.name, reason: reason.into() })?;
            Ok(StagedSecret::fixed(Staged::only(key)))
        }
    }
}

/// The public pass keys every function but mail reads (`PASS_PUBLIC_KEYS_ARN`, a secret holding
/// `{"current": <key>, "next": <key or null>, "previous": <key or null>}`, or locally
/// `PASS_PUBLIC_KEYS`, the same JSON): public halves only, so nothing that reads them can sign a
/// pass. Read on first use (query's cold start does not wait for it) and again after
/// [`secrets_kept`], or at once (at most every [`PASS_KEYS_REREAD`]) for a pass naming a key not
/// in the ring, so a rotation reaches the doors.
#[derive(Clone)]
pub struct PassKeyRingSource {
    ring: std::sync::Arc<tokio::sync::Mutex<Option<(std::time::Instant, PassKeyRing)>>>,
    sdk: Option<aws_config::SdkConfig>,
    /// The secret to read, when not the one `PASS_PUBLIC_KEYS_ARN` names.
    secret: Option<String>,
    kept: Duration,
}

/// The least time between two reads of the public pass keys for passes naming an unknown key.
pub const PASS_KEYS_REREAD: Duration = Duration::from_secs(5);

impl PassKeyRingSource {
    /// Keys already in hand (the local runner, tests): never read again.
    pub fn ready(ring: PassKeyRing) -> Self {
        let far = std::time::Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600);
        Self {
            ring: std::sync::Arc::new(tokio::sync::Mutex::new(Some((far, ring)))),
            sdk: None,
            secret: None,
            kept: Duration::MAX,
        }
    }

    /// The deployment's keys, read when first asked for.
    pub fn deployment(sdk: aws_config::SdkConfig) -> Result<Self, ConfigError> {
        Ok(Self { ring: std::sync::Arc::default(), sdk: Some(sdk), secret: None, kept: secrets_kept()? })
    }

    /// The keys in the secret `id`, read again after `kept`.
    pub fn secret(sdk: aws_config::SdkConfig, id: &str, kept: Duration) -> Self {
        Self { ring: std::sync::Arc::default(), sdk: Some(sdk), secret: Some(id.to_owned()), kept }
    }

    /// The keys, read again if older than `kept`.
    pub async fn get(&self) -> Result<PassKeyRing, ConfigError> {
        self.read_if_older(self.kept).await
    }

    /// The keys, read again if older than [`PASS_KEYS_REREAD`]: for a pass naming a key the ring
    /// does not hold (one published since the last read).
    pub async fn reread(&self) -> Result<PassKeyRing, ConfigError> {
        self.read_if_older(PASS_KEYS_REREAD.min(self.kept)).await
    }

    /// A read that fails keeps the ring read before (asked again after [`PASS_KEYS_REREAD`]);
    /// only the first read's failure is an error.
    async fn read_if_older(&self, age: Duration) -> Result<PassKeyRing, ConfigError> {
        let mut ring = self.ring.lock().await;
        if let Some((read_at, keys)) = ring.as_ref()
            && (read_at.elapsed() < age || self.sdk.is_none())
        {
            return Ok(keys.clone());
        }
        let sdk = self.sdk.as_ref().ok_or(ConfigError::Missing(settings::PASS_PUBLIC_KEYS.name))?;
        let read = match &self.secret {
            Some(id) => crate::secrets::read(sdk, id).await.map_err(|e| ConfigError::SecretUnreadable {
                name: settings::PASS_PUBLIC_KEYS_ARN.name,
                reason: e.to_string(),
            }),
            None => deployment_secret(sdk, settings::PASS_PUBLIC_KEYS_ARN, settings::PASS_PUBLIC_KEYS).await,
        };
        match (read.and_then(|text| parse_ring(&text)), ring.as_mut()) {
            (Ok(keys), _) => {
                *ring = Some((std::time::Instant::now(), keys.clone()));
                Ok(keys)
            }
            (Err(e), Some((read_at, keys))) => {
                tracing::error!(dependency = "secretsmanager", error = %e, "the pass keys could not be read again; the last read serves");
                let back = self.kept.saturating_sub(PASS_KEYS_REREAD);
                *read_at = std::time::Instant::now().checked_sub(back).unwrap_or_else(std::time::Instant::now);
                Ok(keys.clone())
            }
            (Err(e), None) => Err(e),
        }
    }
}

fn parse_ring(text: &str) -> Result<PassKeyRing, ConfigError> {
    published_ring(text).map(|(ring, _)| ring)
}

/// A published ring and when the view it was made from was read (`read_at_ms`; 0 in a ring
/// published before it was written, the oldest).
fn published_ring(text: &str) -> Result<(PassKeyRing, i64), ConfigError> {
    #[derive(serde::Deserialize)]
    struct Ring {
        current: String,
        #[serde(default)]
        next: Option<String>,
        previous: Option<String>,
        #[serde(default)]
        read_at_ms: i64,
    }
    let bad = |reason: &str| ConfigError::Malformed { name: settings::PASS_PUBLIC_KEYS.name, reason: reason.into() };
    let ring: Ring = serde_json::from_str(text)
        .map_err(|_| bad("not {\"current\": <key>, \"next\": <key or null>, \"previous\": <key or null>}"))?;
    let key = |k: &str| PublicPassKey::decode(k).map_err(|_| bad("a key is not 32 bytes of base64url"));
    let keys = PassKeyRing {
        current: key(&ring.current)?,
        next: ring.next.as_deref().map(key).transpose()?,
        previous: ring.previous.as_deref().map(key).transpose()?,
    };
    Ok((keys, ring.read_at_ms))
}

fn ring_text(ring: &PassKeyRing, read_ms: i64) -> String {
    let key = |k: &Option<PublicPassKey>| k.as_ref().map(PublicPassKey::encoded);
    serde_json::json!({
        "current": ring.current.encoded(),
        "next": key(&ring.next),
        "previous": key(&ring.previous),
        "read_at_ms": read_ms,
    })
    .to_string()
}

/// What a publication of the public pass keys did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Publication {
    Written,
    /// The same keys were published already.
    AlreadyPublished,
    /// Other keys are published, from a view read after this one: left as they are (this view
    /// predates a step of the rotation that one shows).
    LaterPublished,
}

/// Mail's publication of the public pass keys ([`crate::handlers::mail::Mail::publish_pass_keys`])
/// into the secret `arn`, with when the view they come from was read (`read_ms`): written only when
/// they differ from what is there, and what is there was not read later (an environment whose view
/// predates a rotation's step, though not stale, never writes it back over the step's keys).
pub async fn publish_pass_keys_to(
    sdk: &aws_config::SdkConfig,
    arn: &str,
    ring: &PassKeyRing,
    read_ms: i64,
) -> Result<Publication, ConfigError> {
    let unreadable = |e: crate::secrets::SecretError| ConfigError::SecretUnreadable {
        name: "PASS_PUBLIC_KEYS_ARN",
        reason: e.to_string(),
    };
    let published = match crate::secrets::read(sdk, arn).await {
        Ok(text) => published_ring(&text).ok(),
        Err(crate::secrets::SecretError::Empty) => None,
        Err(e) => return Err(unreadable(e)),
    };
    match &published {
        Some((keys, _)) if keys == ring => return Ok(Publication::AlreadyPublished),
        Some((keys, read_at)) if *read_at > read_ms => {
            tracing::info!(
                key_id = ring.current.id(),
                published_key_id = keys.current.id(),
                "pass keys read later are published; left as they are"
            );
            return Ok(Publication::LaterPublished);
        }
        _ => {}
    }
    crate::secrets::write(sdk, arn, &ring_text(ring, read_ms)).await.map_err(unreadable)?;
    tracing::info!(
        key_id = ring.current.id(),
        next_key_id = ring.next.as_ref().map(PublicPassKey::id),
        "pass keys published"
    );
    Ok(Publication::Written)
}

/// A secret from Secrets Manager when `arn_var` names one, else the value of `dev_var`.
async fn deployment_secret(
    sdk: &aws_config::SdkConfig,
    arn_var: Variable,
    dev_var: Variable,
) -> Result<String, ConfigError> {
    match arn_var.optional() {
        Some(arn) => crate::secrets::read(sdk, arn.trim())
            .await
            .map_err(|e| ConfigError::SecretUnreadable { name: arn_var.name, reason: e.to_string() }),
        None => dev_var.required(),
    }
}

/// How a lost cache is rebuilt (see `recovery`).
#[derive(Debug, Clone, Copy)]
pub struct RebuildSettings {
    /// How long the rebuild lock lives if its holder dies.
    pub lock_ttl: Duration,
    /// How long a rebuild waits for in-flight orders to be stored.
    pub max_wait: Duration,
    /// How long after the loss was first seen a rebuild that must go by the queue (a bucket lost
    /// with its sent record) waits at least: a grab that wrote on the lost server may still be
    /// sending its order (grab's send gives up within 1.5 s), and the order must be on the queue
    /// before the queue is seen drained.
    pub settle: Duration,
    /// How long after its stop any rebuild waits before it reads DynamoDB: an order stored before
    /// the stop (whose outbox and record entries then left) shows in the orders' index, which
    /// DynamoDB updates eventually, by then.
    pub index_lag: Duration,
}

impl RebuildSettings {
    pub fn from_env() -> Result<Self, ConfigError> {
        Ok(Self {
            lock_ttl: Duration::from_secs(settings::REBUILD_LOCK_SECONDS.read()?),
            max_wait: Duration::from_secs(settings::REBUILD_MAX_WAIT_SECONDS.read()?),
            settle: Duration::from_millis(settings::REBUILD_SETTLE_MS.read()?),
            index_lag: Duration::from_millis(settings::REBUILD_INDEX_LAG_MS.read()?),
        })
    }
}

impl Default for RebuildSettings {
    fn default() -> Self {
        Self {
            lock_ttl: Duration::from_secs(30),
            max_wait: Duration::from_secs(30),
            settle: Duration::from_secs(2),
            index_lag: Duration::from_secs(1),
        }
    }
}

/// How the mail consumer behaves; read once at cold start.
#[derive(Debug, Clone)]
pub struct MailSettings {
    pub from: String,
    /// Messages of one batch handled at once.
    pub concurrency: usize,
    /// A send unanswered this long is counted as unanswered (the order's `mail_unanswered`, the
    /// `MailUnanswered` metric): from here on a second send could be a second mail. It is still
    /// waited for, up to `send_timeout`.
    pub send_patience: Duration,
    /// The longest one send is waited for; past it the send's outcome is unknown and its claim is
    /// kept until `claim_timeout` (never sent again at once).
    pub send_timeout: Duration,
    /// A `SENDING` claim older than this belongs to a sender that crashed or a send that was never
    /// answered; it is taken over. Longer than `send_timeout` and than the function's timeout, so a
    /// live send is never doubled.
    pub claim_timeout: Duration,
}

impl MailSettings {
    /// A whole batch at once: a batch whose sends all wait the full send timeout still ends
    /// within mail's 30 s, so no slow send is cut off by the function's timeout (and sent again).
    pub const DEFAULT_CONCURRENCY: usize = settings::MAIL_CONCURRENCY.default;
    pub const DEFAULT_SEND_PATIENCE: Duration = Duration::from_millis(settings::MAIL_SEND_PATIENCE_MS.default);
    pub const DEFAULT_SEND_TIMEOUT: Duration = Duration::from_secs(settings::MAIL_SEND_TIMEOUT_SECONDS.default);
    pub const DEFAULT_CLAIM_TIMEOUT: Duration = Duration::from_secs(settings::MAIL_CLAIM_TIMEOUT_SECONDS.default);

    pub fn from_env() -> Result<Self, ConfigError> {
        let from = settings::MAIL_FROM.required()?;
        Self::for_sender(from)
    }

    /// The settings of a consumer sending from `from`, the rest from the environment (the local
    /// runner's sender has a development default).
    pub fn for_sender(from: String) -> Result<Self, ConfigError> {
        domain::Email::parse(&from).map_err(|e| ConfigError::Malformed { name: "MAIL_FROM", reason: e.to_string() })?;
        Self::timed(
            from,
            settings::MAIL_CONCURRENCY.read()?.max(1),
            Duration::from_millis(settings::MAIL_SEND_PATIENCE_MS.read()?),
            Duration::from_secs(settings::MAIL_SEND_TIMEOUT_SECONDS.read()?),
            Duration::from_secs(settings::MAIL_CLAIM_TIMEOUT_SECONDS.read()?),
        )
    }

    /// The settings with their times checked against each other: a claim that could expire while its
    /// send is still waited for would let a second sender mail the order again.
    pub fn timed(
        from: String,
        concurrency: usize,
        send_patience: Duration,
        send_timeout: Duration,
        claim_timeout: Duration,
    ) -> Result<Self, ConfigError> {
        if send_patience.is_zero() || send_patience > send_timeout {
            return Err(ConfigError::Malformed {
                name: "MAIL_SEND_PATIENCE_MS",
                reason: "must be positive and at most MAIL_SEND_TIMEOUT_SECONDS".into(),
            });
        }
        if claim_timeout <= send_timeout {
            return Err(ConfigError::Malformed {
                name: "MAIL_CLAIM_TIMEOUT_SECONDS",
                reason: "must be longer than MAIL_SEND_TIMEOUT_SECONDS, or a live send could be doubled".into(),
            });
        }
        Ok(Self { from, concurrency, send_patience, send_timeout, claim_timeout })
    }
}

/// What reconcile does each run.
#[derive(Debug, Clone, Copy)]
pub struct ReconcileSettings {
    /// Outbox entries older than this whose order is not durable are sent again...
    pub outbox_age: Duration,
    /// ...unless the queue still holds messages: then the entry is most likely waiting there, and
    /// a copy would only lengthen the drain. Past this age it is sent again all the same.
    pub outbox_max_wait: Duration,
    /// How often one event's cache is looked at whole (numbers in no place or in two, durable
    /// places missing from the line: `Reconcile::whole`), which reads every order of it: at most
    /// once per this, whatever the runs' pace.
    pub whole_every: Duration,
}

impl ReconcileSettings {
    pub fn from_env() -> Result<Self, ConfigError> {
        Ok(Self {
            outbox_age: Duration::from_secs(settings::RECONCILE_OUTBOX_AGE_SECONDS.read()?),
            outbox_max_wait: Duration::from_secs(settings::RECONCILE_OUTBOX_MAX_WAIT_SECONDS.read()?),
            whole_every: Duration::from_secs(settings::RECONCILE_WHOLE_EVERY_SECONDS.read()?),
        })
    }
}
