//! The AWS SDK configuration, loaded once per execution environment. The emulator is reached
//! through the standard `AWS_ENDPOINT_URL`, so there is no local switch in the code.

use std::time::Duration;

use aws_config::{BehaviorVersion, retry::RetryConfig, timeout::TimeoutConfig};

/// SDK settings with bounded timeouts, from the environment (region, credentials, endpoint).
pub async fn sdk_config() -> aws_config::SdkConfig {
    loader().load().await
}

/// The loader behind [`sdk_config`], for callers that set region, credentials or endpoint
/// themselves (the local runner). A dependency that hangs must not hold a request until the Lambda
/// timeout, so every call is bounded.
pub fn loader() -> aws_config::ConfigLoader {
    aws_config::defaults(BehaviorVersion::latest())
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(1))
                .operation_attempt_timeout(Duration::from_secs(2))
                .operation_timeout(Duration::from_secs(5))
                .build(),
        )
        .retry_config(RetryConfig::standard().with_max_attempts(3))
}
