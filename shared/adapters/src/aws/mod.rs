//! The AWS SDK configuration, loaded once per execution environment. The emulator is reached
//! through the standard `AWS_ENDPOINT_URL`, so there is no local switch in the code.
//!
//! The SDK's HTTPS client trusts Amazon's root CAs only (`amazon-roots.pem`: Amazon Root CA 1-4 and
//! the Starfield Services root that cross-signs them), the roots every AWS endpoint chains to.
//! The SDK's default loads the machine's whole store (about 140 roots, and every file of
//! `SSL_CERT_DIR` where that is set) at cold start: two thirds of a function's init, measured by
//! `fn-costs`, for trust no AWS call needs.

use std::time::Duration;

use aws_config::{
    BehaviorVersion,
    environment::{EnvironmentVariableCredentialsProvider, EnvironmentVariableRegionProvider},
    retry::RetryConfig,
    timeout::TimeoutConfig,
};
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_smithy_http_client::tls::{self, TlsContext, TrustStore};
use aws_smithy_runtime_api::client::{
    connector_metadata::ConnectorMetadata,
    http::{HttpClient, HttpConnectorSettings, SharedHttpClient, SharedHttpConnector},
    runtime_components::RuntimeComponents,
};

/// SDK settings with bounded timeouts, from the environment (region, credentials, endpoint).
pub async fn sdk_config() -> aws_config::SdkConfig {
    loader().load().await
}

/// The loader behind [`sdk_config`], for callers that set region, credentials or endpoint
/// themselves (the local runner). A dependency that hangs must not hold a request until the Lambda
/// timeout, so every call is bounded.
pub fn loader() -> aws_config::ConfigLoader {
    aws_config::defaults(BehaviorVersion::latest())
        // Lambda hands a function its credentials and region in the environment. The default
        // chains would, at every cold start, also build an STS client (web identity, with its own
        // endpoint rules), read profile files and set up the ECS and IMDS providers: a quarter of
        // grab's init instructions, for sources a function never uses (fn-costs, BENCHMARKS.md).
        .credentials_provider(EnvironmentVariableCredentialsProvider::new())
        .region(EnvironmentVariableRegionProvider::new())
        .http_client(https_client())
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(1))
                .operation_attempt_timeout(Duration::from_secs(2))
                .operation_timeout(Duration::from_secs(5))
                .build(),
        )
        .retry_config(RetryConfig::standard().with_max_attempts(3))
}

/// The roots of Amazon Trust Services, which every AWS service endpoint chains to.
const AMAZON_ROOTS: &[u8] = include_bytes!("amazon-roots.pem");

/// The SDK's HTTPS client (rustls on aws-lc, as the SDK's default) trusting Amazon's roots only.
/// (Every SDK crate re-exports the runtime's `SharedHttpClient`.)
fn https_client() -> SharedHttpClient {
    let trust = TrustStore::empty().with_native_roots(false).with_pem_certificate(AMAZON_ROOTS);
    let client = aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(tls::rustls_provider::CryptoMode::AwsLc))
        .tls_context(TlsContext::builder().with_trust_store(trust).build().expect("a TLS context of valid PEM roots"))
        .build_https();
    SharedHttpClient::new(ConnectorOnFirstCall(client))
}

/// The HTTPS client without its check at each service client's construction. That check builds a
/// whole TLS connector (a rustls configuration, its roots parsed) only to throw it away, so that a
/// machine's native roots load at construction rather than at the first request; with the roots
/// compiled in there is nothing to load early, and the connector a request uses is built at the
/// first call and cached either way. One thrown-away connector per service client was most of what
/// a function's init still spent beyond a hello's (fn-costs, docs/BENCHMARKS.md).
#[derive(Debug)]
struct ConnectorOnFirstCall(SharedHttpClient);

impl HttpClient for ConnectorOnFirstCall {
    fn http_connector(&self, settings: &HttpConnectorSettings, components: &RuntimeComponents) -> SharedHttpConnector {
        self.0.http_connector(settings, components)
    }

    fn connector_metadata(&self) -> Option<ConnectorMetadata> {
        self.0.connector_metadata()
    }
}

/// An SDK error as logs and error values may carry it: the service's error code and message, or
/// the kind of transport failure, and never the raw response (`DisplayErrorContext` can quote a
/// response body, and SES quotes recipients). Addresses in a service message are masked too.
pub fn error_summary<E: ProvideErrorMetadata, R>(e: &SdkError<E, R>) -> String {
    match e {
        SdkError::ServiceError(service) => {
            let err = service.err();
            service_summary(err.code(), err.message())
        }
        SdkError::TimeoutError(_) => "timeout".into(),
        SdkError::DispatchFailure(failure) if failure.is_timeout() => "timeout (dispatch)".into(),
        SdkError::DispatchFailure(failure) if failure.is_io() => "connection failed".into(),
        SdkError::DispatchFailure(_) => "dispatch failure".into(),
        SdkError::ResponseError(_) => "unreadable response".into(),
        SdkError::ConstructionFailure(_) => "request could not be built".into(),
        _ => "sdk error".into(),
    }
}

fn service_summary(code: Option<&str>, message: Option<&str>) -> String {
    let message = message.unwrap_or_default();
    let masked: Vec<String> = message
        .split(' ')
        .map(|word| if word.contains('@') { "<address>".to_owned() } else { word.to_owned() })
        .collect();
    format!("{}: {}", code.unwrap_or("UnknownError"), masked.join(" "))
}

#[cfg(test)]
mod tests {
    use base64::Engine;

    #[test]
    fn the_amazon_roots_are_five_whole_certificates() {
        let pem = std::str::from_utf8(super::AMAZON_ROOTS).unwrap();
        let blocks: Vec<&str> = pem
            .split("-----BEGIN CERTIFICATE-----")
            .skip(1)
            .map(|b| b.split("-----END CERTIFICATE-----").next().unwrap())
            .collect();
        assert_eq!(blocks.len(), 5);
        for block in blocks {
            let der = base64::engine::general_purpose::STANDARD.decode(block.split_whitespace().collect::<String>());
            // A DER certificate is one SEQUENCE.
            assert_eq!(der.expect("base64").first(), Some(&0x30));
        }
        // Building the client parses them as rustls will.
        let _ = super::https_client();
    }

    #[test]
    fn a_service_error_is_summarised_without_any_address() {
        let summary = super::service_summary(
            Some("MessageRejected"),
            Some(
                "Email address is not verified. The following identities failed the check: victim@example.org, x@y.io",
            ),
        );
        assert_eq!(
            summary,
            "MessageRejected: Email address is not verified. The following identities failed the check: <address> <address>"
        );
        assert_eq!(super::service_summary(None, None), "UnknownError: ");
    }
}
