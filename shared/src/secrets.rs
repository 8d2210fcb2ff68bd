//! Secrets of the deployment (Secrets Manager), read once per execution environment.

/// Why a secret could not be had. Says nothing of the value.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("{0}")]
    Unreadable(String),
    #[error("the secret has no string value")]
    Empty,
}

/// The string value of the secret `id` (an ARN or name). The value never reaches a log or an
/// error message.
pub async fn read(sdk: &aws_config::SdkConfig, id: &str) -> Result<String, SecretError> {
    let out = aws_sdk_secretsmanager::Client::new(sdk)
        .get_secret_value()
        .secret_id(id)
        .send()
        .await
        .map_err(|e| SecretError::Unreadable(crate::aws::error_summary(&e)))?;
    out.secret_string.filter(|s| !s.is_empty()).ok_or(SecretError::Empty)
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
