//! The adapters a function stands on, built one way from their settings: every function's
//! `from_env` and the local runner call these, so a deployment and a laptop differ only in the
//! values of the settings (the runner's are set visibly in `scripts/local.env`).

use aws_config::SdkConfig;

use crate::{
    config::{ConfigError, GateSettings, MailSettings, QueueSettings, RebuildSettings, StoreSettings},
    gate::{Gate, GateError},
    mailer::Mailer,
    queue::OrderQueue,
    recovery::Rebuilder,
    store::Store,
};

/// Why a function could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot set up the redis client: {0}")]
    Gate(#[from] GateError),
}

/// How Lambda started this environment (`AWS_LAMBDA_INITIALIZATION_TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Init {
    /// On a request's path: on demand (and anything not named below, the local runner too).
    OnDemand,
    /// Ahead of the requests: provisioned concurrency (the warm fleet of grab and verify-hash).
    Provisioned,
}

impl Init {
    pub fn from_env() -> Self {
        Self::named(std::env::var("AWS_LAMBDA_INITIALIZATION_TYPE").ok().as_deref())
    }

    pub fn named(value: Option<&str>) -> Self {
        match value {
            Some("provisioned-concurrency") => Self::Provisioned,
            _ => Self::OnDemand,
        }
    }
}

/// The SDK configuration every AWS client of a function shares, and the constructors of the
/// adapters.
#[derive(Clone)]
pub struct Adapters {
    sdk: SdkConfig,
}

impl Adapters {
    /// A deployment's: the SDK configuration from the function's environment.
    pub async fn from_env() -> Self {
        Self::new(crate::aws::sdk_config().await)
    }

    pub fn new(sdk: SdkConfig) -> Self {
        Self { sdk }
    }

    pub fn sdk(&self) -> &SdkConfig {
        &self.sdk
    }

    /// DynamoDB: the table.
    pub fn store(&self, settings: &StoreSettings) -> Store {
        Store::new(aws_sdk_dynamodb::Client::new(&self.sdk), &settings.table_name)
    }

    /// [`Self::store`] with the function's `TABLE_NAME`.
    pub fn store_from_env(&self) -> Result<Store, ConfigError> {
        Ok(self.store(&StoreSettings::from_env()?))
    }

    /// Redis ([`Gate::new`], which does not connect) with the settings of the function's
    /// environment: its AUTH token read from Secrets Manager when the deployment names one.
    pub async fn gate_from_env(&self) -> Result<Gate, StartError> {
        self.gate_for(&GateSettings::load(&self.sdk).await?, Init::from_env()).await
    }

    /// The gate, connected now when `init` is a provisioned environment's: that init runs before
    /// the open, off every request's path, so the open's first requests do not pay the handshakes
    /// (TCP, TLS, AUTH and, on a cluster, the slot map and a connection to each node). Best effort:
    /// a cache that does not answer is logged, and the first request connects as an on-demand
    /// environment's does. On demand, init is on the first request's path either way and stays as
    /// light as it is (docs/BENCHMARKS.md section 5).
    pub async fn gate_for(&self, settings: &GateSettings, init: Init) -> Result<Gate, StartError> {
        let gate = Gate::new(settings)?;
        if init == Init::Provisioned
            && let Err(e) = gate.connect().await
        {
            tracing::warn!(error = %e, "the cache did not answer in init; the first request connects");
        }
        Ok(gate)
    }

    /// The orders queue, as reconcile and a rebuild send to it.
    pub fn orders_queue(&self, settings: &QueueSettings) -> OrderQueue {
        OrderQueue::new(aws_sdk_sqs::Client::new(&self.sdk), &settings.orders_queue_url)
    }

    /// The orders queue's dead-letter queue, where the settings name one (reconcile's).
    pub fn dead_letters(&self, settings: &QueueSettings) -> Option<crate::queue::DeadLetters> {
        let url = settings.dead_letters_queue_url.as_ref()?;
        Some(crate::queue::DeadLetters::new(aws_sdk_sqs::Client::new(&self.sdk), url))
    }

    /// The orders queue as grab sends to it: within its send budget.
    pub fn grab_queue(&self, settings: &QueueSettings) -> OrderQueue {
        OrderQueue::for_grab(&self.sdk, &settings.orders_queue_url, settings.grab_send_budget)
    }

    /// The exact rebuild of a lost cache, with the queue it waits on (the function's own orders
    /// queue client, where it has one: no second client for it).
    pub fn rebuilder(&self, store: &Store, gate: &Gate, queue: OrderQueue, settings: RebuildSettings) -> Rebuilder {
        Rebuilder::new(store.clone(), gate.clone(), queue, settings)
    }

    /// [`Self::rebuilder`] with the function's queue and rebuild settings.
    pub fn rebuilder_from_env(&self, store: &Store, gate: &Gate) -> Result<Rebuilder, ConfigError> {
        Ok(self.rebuilder(store, gate, self.orders_queue(&QueueSettings::from_env()?), RebuildSettings::from_env()?))
    }

    /// SES, tried once per send within the send timeout; `endpoint` overrides where it is reached
    /// (a fault test's slow SES).
    pub fn mailer(&self, settings: &MailSettings, endpoint: Option<&str>) -> Mailer {
        Mailer::new(Mailer::client(&self.sdk, settings.send_timeout, endpoint), settings.from.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::Init;

    #[test]
    fn only_a_provisioned_environment_counts_as_started_ahead_of_its_requests() {
        assert_eq!(Init::named(Some("provisioned-concurrency")), Init::Provisioned);
        for other in [Some("on-demand"), Some("snap-start"), Some(""), None] {
            assert_eq!(Init::named(other), Init::OnDemand, "{other:?}");
        }
    }
}
