//! Secrets of the deployment (Secrets Manager): read at cold start, and the keys that rotate read
//! again with their stages ([`StagedSecret`]).

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use crate::domain::key_rotation::Staged;

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
    read_stage(&aws_sdk_secretsmanager::Client::new(sdk), id, "AWSCURRENT").await?.ok_or(SecretError::Empty)
}

/// The value staged `stage`; `None` when no version carries that label.
async fn read_stage(
    client: &aws_sdk_secretsmanager::Client,
    id: &str,
    stage: &str,
) -> Result<Option<String>, SecretError> {
    match client.get_secret_value().secret_id(id).version_stage(stage).send().await {
        Ok(out) => Ok(out.secret_string.filter(|s| !s.is_empty())),
        Err(e) if e.as_service_error().is_some_and(|e| e.is_resource_not_found_exception()) => Ok(None),
        Err(e) => Err(SecretError::Unreadable(crate::aws::error_summary(&e))),
    }
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

/// A key that rotates: its stages ([`Staged`]) read from a secret, and read again once older than
/// `kept`, so a rotation reaches every running environment (docs/DEPLOY.md, "Rotating keys").
/// A read that fails keeps the stages read before; only the first read's failure is an error.
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
    read: tokio::sync::RwLock<Option<(Instant, Arc<Staged<K>>)>>,
}

impl<K> std::fmt::Debug for StagedSecret<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StagedSecret").field("kept", &self.inner.kept).finish_non_exhaustive()
    }
}

impl<K: Send + Sync> StagedSecret<K> {
    /// Keys already in hand (a development value, tests): never read again.
    pub fn fixed(staged: Staged<K>) -> Self {
        Self {
            inner: Arc::new(Inner {
                from: None,
                parse: |_| Err("a fixed key is never read"),
                kept: Duration::MAX,
                read: tokio::sync::RwLock::new(Some((Instant::now(), Arc::new(staged)))),
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
            }),
        }
    }

    /// The stages as last read, without reading (a fixed key's are always there).
    pub fn last(&self) -> Option<Arc<Staged<K>>> {
        self.inner.read.try_read().ok().and_then(|r| r.as_ref().map(|(_, s)| s.clone()))
    }

    /// The stages, read again if older than `kept`.
    pub async fn get(&self) -> Result<Arc<Staged<K>>, SecretError> {
        let fresh = |read: &Option<(Instant, Arc<Staged<K>>)>| match read {
            Some((at, staged)) if at.elapsed() < self.inner.kept => Some(staged.clone()),
            _ => None,
        };
        if let Some(staged) = fresh(&*self.inner.read.read().await) {
            return Ok(staged);
        }
        let mut read = self.inner.read.write().await;
        if let Some(staged) = fresh(&read) {
            return Ok(staged);
        }
        // Boxed: the SDK's futures would otherwise sit inline in every handler's that asks for a key.
        match Box::pin(self.read_stages()).await {
            Ok(staged) => {
                let staged = Arc::new(staged);
                *read = Some((Instant::now(), staged.clone()));
                Ok(staged)
            }
            Err(e) => match read.as_mut() {
                Some((at, staged)) => {
                    tracing::warn!(dependency = "secretsmanager", error = %e, "a key's stages could not be read again; the last read serves");
                    let retry_in = self.inner.kept.saturating_sub(RETRY_AFTER_FAILURE);
                    *at = Instant::now().checked_sub(retry_in).unwrap_or_else(Instant::now);
                    Ok(staged.clone())
                }
                None => Err(e),
            },
        }
    }

    async fn read_stages(&self) -> Result<Staged<K>, SecretError> {
        let Some((client, id)) = &self.inner.from else {
            return Err(SecretError::Empty);
        };
        let (current, pending, previous) = futures::future::try_join3(
            read_stage(client, id, "AWSCURRENT"),
            read_stage(client, id, "AWSPENDING"),
            read_stage(client, id, "AWSPREVIOUS"),
        )
        .await?;
        let current = current.ok_or(SecretError::Empty)?;
        // A version may carry two labels (made current, still pending): one key, checked once.
        let other = |v: Option<String>| v.filter(|v| *v != current);
        let (pending, previous) = (other(pending), other(previous));
        let parse = |v: &str| (self.inner.parse)(v).map_err(SecretError::Malformed);
        Ok(Staged {
            current: parse(&current)?,
            pending: pending.as_deref().map(parse).transpose()?,
            previous: previous.as_deref().map(parse).transpose()?,
        })
    }
}
