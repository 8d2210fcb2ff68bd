//! HTTP clients for the runner's tools and the tests: reqwest over rustls with the crypto provider
//! the AWS SDK already uses (aws-lc-rs), so the workspace has one TLS stack. reqwest needs that
//! provider installed for the process before any client is built; [`builder`] makes sure it is.

/// A client builder, the process's crypto provider installed first.
pub fn builder() -> reqwest::ClientBuilder {
    // Already installed (by an earlier call or the caller) is fine.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    reqwest::Client::builder()
}

/// A client with reqwest's defaults.
pub fn new() -> reqwest::Client {
    builder().build().expect("an HTTP client with the default settings")
}
