//! Secrets of the deployment (Secrets Manager): read at cold start, and the keys that rotate read
//! again with their stages ([`StagedSecret`]).

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use domain::key_rotation::Staged;

/// Why a secret could not be had. Says nothing of the value.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("{0}")]
    Unreadable(String),
    #[error("the secret has no string value")]
    Empty,
    #[error("a version of the secret is malformed: {0}")]
    Malformed(&'static str),
}

/// The string value of the secret `id` (an ARN or name). The value never reaches a log or an
/// error message.
pub async fn read(sdk: &aws_config::SdkConfig, id: &str) -> Result<String, SecretError> {
    let client = aws_sdk_secretsmanager::Client::new(sdk);
    Ok(read_version(&client, id, "AWSCURRENT").await?.ok_or(SecretError::Empty)?.value)
}

/// Writes a new string value of the secret `id` (the public pass keys: public, so no harm in a
/// log, but never logged either).
pub async fn write(sdk: &aws_config::SdkConfig, id: &str, value: &str) -> Result<(), SecretError> {
    aws_sdk_secretsmanager::Client::new(sdk)
        .put_secret_value()
        .secret_id(id)
        .secret_string(value)
        .send()
        .await
        .map_err(|e| SecretError::Unreadable(crate::aws::error_summary(&e)))?;
    Ok(())
}

/// How soon a key whose stages could not be read again is asked for again (the last stages read
/// serve meanwhile).
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(5);

/// How much older than `kept` the stages read may be and still serve while a read runs in the
/// background, so a request never waits on Secrets Manager (an environment frozen since, thawed at
/// the open; a provisioned one initialised at the warm fleet's lead, 5 minutes before it). What
/// they sign, every other environment accepts: `scripts/rotate-key` promotes a key at most once in
/// `ROTATE_MIN_AGE_SECONDS` (1,800 s from the last promotion, whose step waits `kept` + 15 s after
/// the staging), which covers this view's age past `kept` and then the longest a signed thing must
/// stay accepted (an order on the queue before its DLQ: 900 s; a hash: 600 s). What they check fails only on a key staged since:
/// [`StagedSecret::check`] reads again then. Older (a read that keeps failing), nothing is served:
/// the request fails (`503`) rather than sign with a key others may have dropped.
pub const STALE_SERVED_FOR: Duration = Duration::from_secs(900);

/// The read in the background of stages older than `kept` starts after a random part of this: a
/// warm fleet thawed at the open would otherwise read every key in the same second (the hot
/// event's 26,400 environments, about 40,800 `DescribeSecret` calls against the account's 40,000
/// a second). The stages in hand serve meanwhile.
const BACKGROUND_READ_SPREAD: Duration = Duration::from_secs(5);

/// A random part of [`BACKGROUND_READ_SPREAD`] (a UUIDv7's random bits).
fn background_read_delay() -> Duration {
    let random = crate::random_fraction();
    BACKGROUND_READ_SPREAD.mul_f64(random)
}

/// How many times a read of the stages is tried when the current version could not be read after
/// its label (a rotation's step landing in the middle), and how long it waits before each.
const TORN_READS: usize = 3;
const TORN_READ_PAUSE: Duration = Duration::from_millis(150);

/// A key that rotates: its stages ([`Staged`]) read from a secret, and read again once older than
/// `kept`, so a rotation reaches every running environment (docs/DEPLOY.md, "Rotating keys").
/// Older, they serve while a read runs in the background (for at most [`STALE_SERVED_FOR`] since
/// they were read), so requests do not wait; a check they fail is tried again on the stages read
/// again ([`StagedSecret::check`]). A read that fails keeps the stages read before, within that
/// bound.
pub struct StagedSecret<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for StagedSecret<K> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone() }
    }
}

struct Inner<K> {
    /// The secret and the client that reads it; `None`: a fixed key, never read.
    from: Option<(aws_sdk_secretsmanager::Client, String)>,
    parse: fn(&str) -> Result<K, &'static str>,
    kept: Duration,
    read: tokio::sync::RwLock<Option<Held<K>>>,
    /// A background read is under way.
    reading: std::sync::atomic::AtomicBool,
    /// Held while the stages are read, with when the last read began: callers that asked before
    /// it began and waited on it take what it left rather than read again (a burst of checks
    /// failing on a key staged since reads once, whether the read succeeds or not).
    refreshing: tokio::sync::Mutex<Option<Instant>>,
    /// The values of the versions labelled at the last read, by version id.
    values: std::sync::Mutex<std::collections::HashMap<String, String>>,
}

/// The stages in hand: when they were read (the bound on serving them), and when to read again
/// (pushed back after a failed read, so a failing Secrets Manager is asked every few seconds).
struct Held<K> {
    fetched: Read,
    due_from: Read,
    staged: Arc<Staged<K>>,
}

/// When stages were read: both clocks, since a frozen Lambda environment's monotonic clock may
/// not count the time it was frozen, and the wall clock may step.
#[derive(Clone, Copy)]
struct Read {
    at: Instant,
    wall: std::time::SystemTime,
}

impl Read {
    fn now() -> Self {
        Self { at: Instant::now(), wall: std::time::SystemTime::now() }
    }
    /// How old, by the larger of the two clocks.
    fn age(&self) -> Duration {
        self.at.elapsed().max(self.wall.elapsed().unwrap_or_default())
    }
}

impl<K> std::fmt::Debug for StagedSecret<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StagedSecret").field("kept", &self.inner.kept).finish_non_exhaustive()
    }
}

impl<K: Send + Sync + 'static> StagedSecret<K> {
    /// Keys already in hand (a development value, tests): never read again.
    pub fn fixed(staged: Staged<K>) -> Self {
        Self {
            inner: Arc::new(Inner {
                from: None,
                parse: |_| Err("a fixed key is never read"),
                kept: Duration::MAX,
                read: tokio::sync::RwLock::new(Some(Held {
                    fetched: Read::now(),
                    due_from: Read::now(),
                    staged: Arc::new(staged),
                })),
                reading: Default::default(),
                refreshing: Default::default(),
                values: Default::default(),
            }),
        }
    }

    /// The secret `id`, each version made a key by `parse`; read when first asked for.
    pub fn secret(
        sdk: &aws_config::SdkConfig,
        id: &str,
        parse: fn(&str) -> Result<K, &'static str>,
        kept: Duration,
    ) -> Self {
        let client = aws_sdk_secretsmanager::Client::new(sdk);
        Self {
            inner: Arc::new(Inner {
                from: Some((client, id.to_owned())),
                parse,
                kept,
                read: tokio::sync::RwLock::new(None),
                reading: Default::default(),
                refreshing: Default::default(),
                values: Default::default(),
            }),
        }
    }

    /// The stages as last read, without reading (a fixed key's are always there).
    pub fn last(&self) -> Option<Arc<Staged<K>>> {
        self.inner.read.try_read().ok().and_then(|r| r.as_ref().map(|h| h.staged.clone()))
    }

    /// The stages: read less than `kept` ago, as last read; older, as last read with a read in
    /// the background (up to [`STALE_SERVED_FOR`] since they were read, a fixed key's always);
    /// older still (or never read), read now.
    pub async fn get(&self) -> Result<Arc<Staged<K>>, SecretError> {
        let stale = match &*self.inner.read.read().await {
            Some(h) if self.inner.from.is_none() => return Ok(h.staged.clone()),
            Some(h) if h.fetched.age() >= self.stale_bound() => None,
            Some(h) if h.due_from.age() < self.inner.kept => return Ok(h.staged.clone()),
            Some(h) => Some(h.staged.clone()),
            None => None,
        };
        let Some(stale) = stale else { return self.refresh().await };
        if !self.inner.reading.swap(true, std::sync::atomic::Ordering::AcqRel) {
            let this = self.clone();
            tokio::spawn(async move {
                tokio::time::sleep(background_read_delay()).await;
                let _ = this.refresh().await;
                this.inner.reading.store(false, std::sync::atomic::Ordering::Release);
            });
        }
        Ok(stale)
    }

    /// How old a view may be and still serve: `kept`, then [`STALE_SERVED_FOR`] more.
    fn stale_bound(&self) -> Duration {
        self.inner.kept.saturating_add(STALE_SERVED_FOR)
    }

    /// The stages read less than `kept` ago, read now if older (mail publishes the pass keys'
    /// public halves from these: a view served stale must never overwrite a newer ring).
    pub async fn fresh(&self) -> Result<Arc<Staged<K>>, SecretError> {
        match &*self.inner.read.read().await {
            Some(h) if self.inner.from.is_none() || h.fetched.age() < self.inner.kept => {
                return Ok(h.staged.clone());
            }
            _ => {}
        }
        self.read_now().await
    }

    /// The stages as a read that began after this asked found them: never a view from before
    /// (a failed read is an error here, where [`Self::refresh`] hands back the last view). The
    /// rotation's runbook publishes the pass keys from this.
    pub async fn read_now(&self) -> Result<Arc<Staged<K>>, SecretError> {
        if self.inner.from.is_none() {
            return self.last().ok_or(SecretError::Empty);
        }
        let asked = Instant::now();
        let staged = self.refresh().await?;
        // Only a read that began after this asked (a failed read hands back the view before it).
        match &*self.inner.read.read().await {
            Some(h) if Arc::ptr_eq(&h.staged, &staged) && h.fetched.at >= asked => Ok(staged),
            _ => Err(SecretError::Unreadable("the stages could not be read again".into())),
        }
    }

    /// Something signed with one of the key's versions, checked by `check` against each accepted
    /// version: against the stages as last read (and any read since), and, when none passes and
    /// they are older than `kept`, against the stages read again (a version staged since, which
    /// other environments may sign with already). The outer error: the stages could not be had.
    /// Only a refusal a newer version might pass (a signature no version in hand matches) reads
    /// again: an expired or malformed one costs nothing.
    pub async fn check<E: domain::key_rotation::NewerKeyMightPass>(
        &self,
        check: impl Fn(&K) -> Result<(), E>,
    ) -> Result<Result<(), E>, SecretError> {
        let staged = self.get().await?;
        let first = staged.check(&check);
        if first.as_ref().is_ok()
            || self.inner.from.is_none()
            || first.as_ref().is_err_and(|e| !e.newer_key_might_pass())
        {
            return Ok(first);
        }
        // The view in hand read less than `kept` ago holds every version that may sign: nothing
        // newer to read. (A view read since `get` is `refresh_beyond`'s to take, without a read.)
        let young = self.inner.read.try_read().is_ok_and(|read| {
            read.as_ref().is_some_and(|h| Arc::ptr_eq(&h.staged, &staged) && h.fetched.age() < self.inner.kept)
        });
        if young {
            return Ok(first);
        }
        let again = self.refresh_beyond(Some(&staged)).await?;
        Ok(if Arc::ptr_eq(&again, &staged) { first } else { again.check(&check) })
    }

    /// The stages read now (mail's `{"publish": "pass-keys"}` asks for them so, during a
    /// rotation); a read that fails keeps the stages read before (within [`STALE_SERVED_FOR`]),
    /// asked again after [`RETRY_AFTER_FAILURE`]. Reads do not overlap: one that asked before
    /// another began takes what it left.
    pub async fn refresh(&self) -> Result<Arc<Staged<K>>, SecretError> {
        self.refresh_beyond(None).await
    }

    /// [`Self::refresh`], for a caller whose check failed on `seen`: a view read since, younger
    /// than `kept` (the background read's, another check's), serves it without another read.
    async fn refresh_beyond(&self, seen: Option<&Arc<Staged<K>>>) -> Result<Arc<Staged<K>>, SecretError> {
        if self.inner.from.is_none() {
            return self.last().ok_or(SecretError::Empty);
        }
        let asked = Instant::now();
        let mut last_began = self.inner.refreshing.lock().await;
        if let Some(h) = &*self.inner.read.read().await {
            let began_since = last_began.is_some_and(|began| began >= asked);
            let newer_than_seen =
                seen.is_some_and(|seen| !Arc::ptr_eq(seen, &h.staged)) && h.fetched.age() < self.inner.kept;
            if (began_since && h.fetched.age() < self.stale_bound()) || newer_than_seen {
                return Ok(h.staged.clone());
            }
        }
        // The time before the read: the stages are at least this old when they arrive.
        let started = Read::now();
        *last_began = Some(started.at);
        let result = Box::pin(self.read_stages()).await;
        let mut read = self.inner.read.write().await;
        match result {
            Ok(staged) => {
                let staged = Arc::new(staged);
                *read = Some(Held { fetched: started, due_from: started, staged: staged.clone() });
                Ok(staged)
            }
            Err(e) => match read.as_mut() {
                Some(h) if h.fetched.age() < self.stale_bound() => {
                    tracing::error!(dependency = "secretsmanager", error = %e, "a key's stages could not be read again; the last read serves");
                    crate::metrics::outcome("keys", "STALE", 0.0);
                    let back = self.inner.kept.saturating_sub(RETRY_AFTER_FAILURE);
                    h.due_from = Read {
                        at: Instant::now().checked_sub(back).unwrap_or_else(Instant::now),
                        wall: std::time::SystemTime::now().checked_sub(back).unwrap_or_else(std::time::SystemTime::now),
                    };
                    Ok(h.staged.clone())
                }
                _ => {
                    tracing::error!(dependency = "secretsmanager", error = %e, "a key's stages could not be read, and none recent enough are in hand");
                    crate::metrics::outcome("keys", "UNREADABLE", 0.0);
                    Err(e)
                }
            },
        }
    }

    /// One consistent view of the stages: the labels as one `DescribeSecret` gives them, then
    /// each labelled version's value, from [`Inner::values`] when read before (a version's value
    /// never changes), so reading again a secret no rotation touched costs one `DescribeSecret`
    /// (40,000 a second an account, against `GetSecretValue`'s 10,000: a warm fleet thawed at the
    /// open reads every key again in its first seconds). A current version not found after its
    /// label reads the labels again.
    async fn read_stages(&self) -> Result<Staged<K>, SecretError> {
        let Some((client, id)) = &self.inner.from else {
            return Err(SecretError::Empty);
        };
        for _ in 0..TORN_READS {
            let began = domain::event::epoch_ms(time::OffsetDateTime::now_utc());
            let labels = client
                .describe_secret()
                .secret_id(id)
                .send()
                .await
                .map_err(|e| SecretError::Unreadable(crate::aws::error_summary(&e)))?
                .version_ids_to_stages
                .unwrap_or_default();
            let staged_as = |stage: &str| {
                labels.iter().find(|(_, stages)| stages.iter().any(|s| s == stage)).map(|(version, _)| version.as_str())
            };
            let Some(current) = staged_as("AWSCURRENT") else { return Err(SecretError::Empty) };
            // The current version not found (a label moved meanwhile, or the read ran ahead of
            // the labels): the labels read again, a moment later.
            let Some(current) = self.value_of(client, id, current).await? else {
                tokio::time::sleep(TORN_READ_PAUSE).await;
                continue;
            };
            // A pending or previous version not found is left out, as no label would be (a
            // staging whose version is not readable yet: AWS lists an `AWSPENDING` id before its
            // version exists).
            let pending = match staged_as("AWSPENDING") {
                Some(version) => self.value_of(client, id, version).await?,
                None => None,
            };
            let previous = match staged_as("AWSPREVIOUS") {
                Some(version) => self.value_of(client, id, version).await?,
                None => None,
            };
            let nonempty = |v: Option<Version>| v.filter(|v| !v.value.is_empty());
            let current = nonempty(Some(current)).ok_or(SecretError::Empty)?;
            self.inner
                .values
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .retain(|version, _| labels.contains_key(version));
            return self.stages(current, nonempty(pending), nonempty(previous), began);
        }
        Err(SecretError::Unreadable("the secret's stages kept moving while read".into()))
    }

    /// The value of `version` (empty when it holds no string): as read before, or read now;
    /// `None` when the version is gone.
    async fn value_of(
        &self,
        client: &aws_sdk_secretsmanager::Client,
        id: &str,
        version: &str,
    ) -> Result<Option<Version>, SecretError> {
        let held = self.inner.values.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).get(version).cloned();
        if let Some(value) = held {
            return Ok(Some(Version { id: version.to_owned(), value }));
        }
        let read = match client.get_secret_value().secret_id(id).version_id(version).send().await {
            Ok(out) => Some(out.secret_string.unwrap_or_default()),
            Err(e) if e.as_service_error().is_some_and(|e| e.is_resource_not_found_exception()) => None,
            Err(e) => return Err(SecretError::Unreadable(crate::aws::error_summary(&e))),
        };
        Ok(read.map(|value| {
            self.inner
                .values
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .insert(version.to_owned(), value.clone());
            Version { id: version.to_owned(), value }
        }))
    }

    /// The stages as keys. Only the current value must be a key: a malformed pending or previous
    /// one is left out (and logged), so a bad value staged by mistake stops nothing.
    fn stages(
        &self,
        current: Version,
        pending: Option<Version>,
        previous: Option<Version>,
        read_ms: i64,
    ) -> Result<Staged<K>, SecretError> {
        let parse = self.inner.parse;
        let other = |v: Option<Version>| -> Option<K> {
            let v = v.filter(|v| v.id != current.id && v.value != current.value)?;
            match parse(&v.value) {
                Ok(key) => Some(key),
                Err(why) => {
                    tracing::error!(version = %v.id, why, "a staged version of a key is malformed; left out");
                    None
                }
            }
        };
        Ok(Staged {
            pending: other(pending),
            previous: other(previous),
            current: parse(&current.value).map_err(SecretError::Malformed)?,
            read_ms,
        })
    }
}

/// One version of a secret: its id and value.
struct Version {
    id: String,
    value: String,
}

/// The version staged `stage`; `None` when no version carries that label.
async fn read_version(
    client: &aws_sdk_secretsmanager::Client,
    id: &str,
    stage: &str,
) -> Result<Option<Version>, SecretError> {
    match client.get_secret_value().secret_id(id).version_stage(stage).send().await {
        Ok(out) => Ok(out
            .secret_string
            .filter(|s| !s.is_empty())
            .map(|value| Version { id: out.version_id.unwrap_or_default(), value })),
        Err(e) if e.as_service_error().is_some_and(|e| e.is_resource_not_found_exception()) => Ok(None),
        Err(e) => Err(SecretError::Unreadable(crate::aws::error_summary(&e))),
    }
}
