//! Every setting a function reads from its environment: its variable, its default, who reads it
//! and what it means, written once. The readers in [`crate::config`] read each through its entry
//! here; docs/DESIGN.md section 14's table is written from [`ALL`] by `cargo xtask gen`.

use std::{env, str::FromStr};

/// Why a setting could not be had: the layer's error, every reader's.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("environment variable {0} is not set")]
    Missing(&'static str),
    #[error("environment variable {name} is malformed: {reason}")]
    Malformed { name: &'static str, reason: String },
    #[error("the secret named by {name} cannot be read: {reason}")]
    SecretUnreadable { name: &'static str, reason: String },
}

/// A variable with a default: read as `T`, the default when unset or blank; a malformed value is
/// an error naming the variable.
#[derive(Debug, Clone, Copy)]
pub struct Setting<T: 'static> {
    pub name: &'static str,
    pub default: T,
}

impl<T: FromStr + Copy> Setting<T>
where
    T::Err: std::fmt::Display,
{
    pub fn read(&self) -> Result<T, ConfigError> {
        match env::var(self.name) {
            Ok(v) if !v.trim().is_empty() => {
                v.trim().parse().map_err(|e: T::Err| ConfigError::Malformed { name: self.name, reason: e.to_string() })
            }
            _ => Ok(self.default),
        }
    }
}

impl Setting<&'static str> {
    /// The text, the default when unset or blank.
    pub fn text(&self) -> String {
        env::var(self.name).ok().filter(|v| !v.trim().is_empty()).unwrap_or_else(|| self.default.to_owned())
    }
}

/// A variable without a default: required where it is read, or left unset.
#[derive(Debug, Clone, Copy)]
pub struct Variable {
    pub name: &'static str,
}

impl Variable {
    /// Its value; unset or blank is an error naming it.
    pub fn required(&self) -> Result<String, ConfigError> {
        self.optional().ok_or(ConfigError::Missing(self.name))
    }

    /// Its value, `None` when unset or blank.
    pub fn optional(&self) -> Option<String> {
        env::var(self.name).ok().filter(|v| !v.trim().is_empty())
    }
}

/// What the docs say of one setting.
#[derive(Debug, Clone, Copy)]
pub struct About {
    pub name: &'static str,
    /// Its default as text; `None`: no default.
    pub default: fn() -> Option<String>,
    pub read_by: &'static str,
    pub meaning: &'static str,
}

macro_rules! settings {
    ($($name:ident: $kind:tt $(<$ty:ty>)? $(= $default:expr)?; $read_by:literal; $meaning:literal;)*) => {
        $(settings!(@one $name $kind $(<$ty>)? $(= $default)?);)*

        /// Every setting, in the order of section 14's table.
        pub const ALL: &[About] = &[$(About {
            name: stringify!($name),
            default: || settings!(@shown $name $kind),
            read_by: $read_by,
            meaning: $meaning,
        }),*];
    };
    (@one $name:ident value <$ty:ty> = $default:expr) => {
        pub const $name: Setting<$ty> = Setting { name: stringify!($name), default: $default };
    };
    (@one $name:ident variable) => {
        pub const $name: Variable = Variable { name: stringify!($name) };
    };
    (@shown $name:ident value) => { Some($name.default.to_string()) };
    (@shown $name:ident variable) => { None };
}

settings! {
    TABLE_NAME: variable; "all"; "the DynamoDB table";
    REDIS_URL: variable; "all but door and pages";
        "`redis://` or `rediss://`; with `REDIS_CLUSTER=true`, a cluster's configuration endpoint (or nodes, comma-separated)";
    REDIS_CLUSTER: value<bool> = false; "all but door and pages"; "`true`: `REDIS_URL` is a Redis Cluster";
    REDIS_CONNECT_TIMEOUT_MS: value<u64> = 500; "all but door and pages"; "a connection's making, at most: a dead Redis is a fast `503 BUSY`";
    REDIS_COMMAND_TIMEOUT_MS: value<u64> = 500; "all but door and pages"; "a command's answer, at most";
    REDIS_REPLICA_WAIT_MS: value<u64> = 100; "grab";
        "how long a grab whose send failed waits for a replica; and a `SOLD_OUT` for every replica before the memory starts";
    REDIS_READER_URL: variable; "grab";
        "where refusals of a sold-out event read the user's field: the reader endpoint (in cluster mode the configuration endpoint: reads go to each slot's replicas); unset, the primary";
    SOLD_OUT_MEMORY_MS: value<u64> = 1_000; "grab";
        "how long an environment remembers an event sold out, for each of its buckets (0: never): section 6";
    REDIS_READER_REFRESH_MS: value<u64> = 600_000; "grab";
        "in cluster mode, how long the reader keeps one map of the slots' replicas: then it reads the slots again in the background, so a replica added since serves refusals too; each reading is a new connection to every node, so not more often";
    REDIS_AUTH_SECRET_ARN: variable; "all but door and pages"; "the cache's AUTH token, deployed: the secret";
    REDIS_AUTH_TOKEN: variable; "all but door and pages"; "the cache's AUTH token, locally";
    ORDERS_QUEUE_URL: variable; "grab, query, release, reconcile"; "the orders queue";
    DEAD_LETTERS_QUEUE_URL: variable; "reconcile"; "the orders queue's dead letters (an operator's redrive)";
    GRAB_SEND_BUDGET_MS: value<u64> = 1_500; "grab"; "one order's send to SQS, both attempts; a rebuild settles longer than this";
    HASH_SECRET_ARN: variable; "verify-hash, grab, release";
        "the verify hash's key, deployed (at least 16 bytes); the entry receipts' keys derive from it (release commits a draw's event to their public halves)";
    HASH_SECRET: variable; "verify-hash, grab, release"; "the verify hash's key, locally";
    ORDER_KEY_ARN: variable; "grab, reconcile, mail, release"; "the key that seals order messages, deployed";
    ORDER_KEY: variable; "grab, reconcile, mail, release"; "the key that seals order messages, locally";
    PASS_KEY_ARN: variable; "mail"; "the pass's private key, deployed";
    PASS_KEY: variable; "mail"; "the pass's private key, locally";
    PASS_PUBLIC_KEYS_ARN: variable; "mail, query, door"; "the published public pass keys, deployed (mail writes them)";
    PASS_PUBLIC_KEYS: variable; "query, door"; "the public pass keys, locally (the JSON mail would publish)";
    SECRETS_KEPT_SECONDS: value<u64> = 60; "verify-hash, grab, release, reconcile, mail, query, door";
        "how long an environment keeps a rotating key's stages (`AWSCURRENT` signs; `AWSPENDING` and `AWSPREVIOUS` are checked too) before reading them again: docs/DEPLOY.md, \"Rotating keys\"";
    HASH_TTL_SECONDS: value<u64> = 600; "verify-hash"; "a hash's life";
    HASH_OPEN_MARGIN_SECONDS: value<u64> = 5; "verify-hash"; "how early before the sale's start a hash can be had";
    GRAB_RATE_LIMIT: value<u32> = 5; "grab"; "refused grabs per user per event per window (a holder's retries are never limited)";
    GRAB_RATE_WINDOW_MS: value<u64> = 1_000; "grab, query, verify-hash, door"; "the window of every per-user limit";
    MAIL_FROM: variable; "mail"; "the sender (a verified SES identity)";
    MAIL_CONCURRENCY: value<usize> = crate::queue::MAX_BATCH; "mail";
        "the mails one invocation sends at once: a whole batch, so a batch whose sends all wait the full send timeout still ends within mail's 30 s";
    MAIL_SEND_PATIENCE_MS: value<u64> = 2_000; "mail"; "a send unanswered this long is counted as unanswered (the order's `mail_unanswered`, the `MailUnanswered` metric): from here on a second send could be a second mail; it is still waited for, up to the send timeout (RELIABILITY.md)";
    MAIL_SEND_TIMEOUT_SECONDS: value<u64> = 25; "mail"; "a send's answer, at most (RELIABILITY.md)";
    MAIL_CLAIM_TIMEOUT_SECONDS: value<u64> = 90; "mail";
        "a `SENDING` claim older than this belongs to a sender that crashed, and is taken over: longer than the send timeout and the function's";
    RECONCILE_OUTBOX_AGE_SECONDS: value<u64> = 30; "reconcile"; "outbox entries older than this whose order is not durable are sent again, unless the queue still holds messages (then the entry is most likely waiting there)";
    RECONCILE_OUTBOX_MAX_WAIT_SECONDS: value<u64> = 300; "reconcile"; "past this age an entry is sent again all the same, messages on the queue or not";
    RECONCILE_WHOLE_EVERY_SECONDS: value<u64> = 50; "reconcile";
        "how often one event's cache is looked at whole (every run, at the schedule's minute), which reads every order of it (section 10, \"Repair\")";
    ORDER_STUCK_AFTER_SECONDS: value<u64> = domain::audit::ORDER_STUCK_AFTER.as_secs(); "query";
        "how long an order may wait to be stored, none stored meanwhile, before the audit's `orders_stored_in_time` fails";
    GRAB_FUNCTION_NAME: variable; "reconcile"; "where the warm fleet is provisioned; unset, no fleet is kept (the local runner, sam local)";
    VERIFY_HASH_FUNCTION_NAME: variable; "reconcile"; "the same, for verify-hash";
    FLEET_ALIAS: value<&'static str> = "live"; "reconcile"; "the alias the warm fleet is provisioned on (the template's `AutoPublishAlias`)";
    GRAB_RESERVED_CONCURRENCY: value<u32> = 0; "release, reconcile"; "grab's reserved concurrency, which caps the fleet (0: none)";
    VERIFY_HASH_RESERVED_CONCURRENCY: value<u32> = 0; "release, reconcile"; "verify-hash's, the same";
    GRAB_ROUTE_THROTTLE: value<u32> = 0; "release"; "the grab route's throttle an expected rate is checked against (0: none)";
    VERIFY_HASH_ROUTE_THROTTLE: value<u32> = 0; "release"; "the verify-hash route's, the same";
    STAGE_THROTTLE: value<u32> = 0; "release"; "the stage's, the same";
    EDGE: value<&'static str> = "none"; "release"; "`cloudfront` when the edge stands in front of the API: the rate is checked against the distribution's quota too";
    REBUILD_MAX_WAIT_SECONDS: value<u64> = 30; "grab, query, release, reconcile"; "how long a rebuild that goes by the queue waits for it at most (section 10)";
    REBUILD_LOCK_SECONDS: value<u64> = 30; "grab, query, release, reconcile"; "the rebuild's lock";
    REBUILD_SETTLE_MS: value<u64> = 2_000; "grab, query, release, reconcile"; "how long a rebuild waits at least";
    REBUILD_INDEX_LAG_MS: value<u64> = 1_000; "grab, query, release, reconcile";
        "how long after the loss any rebuild waits before it reads DynamoDB: the orders' index catching up; locally 0 (the emulator's index is read as written)";
    BEACON_CHAIN: variable; "release"; "a drand chain a draw may name besides quicknet: `name,public key hex,genesis unix seconds,period seconds` (docs/FAIRNESS.md)";
    AWS_ENDPOINT_URL: variable; "all"; "set locally to the emulator; unset in AWS";
    AWS_LAMBDA_LOG_LEVEL: variable; "all"; "the log level (Lambda's advanced logging controls set it); `info` when neither it nor `RUST_LOG` is set";
    RUST_LOG: variable; "all"; "the log level where `AWS_LAMBDA_LOG_LEVEL` is unset";
    COGNITO_HOSTED_UI: variable; "pages"; "where the pages send a person to sign in (with `USER_POOL_CLIENT_ID`, or neither: then a pasted token only)";
    USER_POOL_CLIENT_ID: variable; "pages"; "the user pool's client the pages sign in with";
}
