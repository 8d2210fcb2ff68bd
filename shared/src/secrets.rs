//! Secrets of the deployment (Secrets Manager), read once per execution environment.

use crate::config::ConfigError;

/// The string value of the secret `id` (an ARN or name), which the variable `name` pointed to.
/// The value never reaches a log or an error message.
pub async fn read(sdk: &aws_config::SdkConfig, name: &'static str, id: &str) -> Result<String, ConfigError> {
    let out = aws_sdk_secretsmanager::Client::new(sdk)
        .get_secret_value()
        .secret_id(id)
        .send()
        .await
        .map_err(|e| ConfigError::SecretUnreadable { name, reason: crate::aws::error_summary(&e) })?;
    out.secret_string
        .filter(|s| !s.is_empty())
        .ok_or(ConfigError::SecretUnreadable { name, reason: "the secret has no string value".into() })
}
