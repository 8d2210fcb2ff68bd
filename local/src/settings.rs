//! The local runner's settings: the same variables as `scripts/local.env`, with the same defaults,
//! so `cargo run -p local-runner` works with or without that file sourced.

use shared::{
    config::{
        ConfigError, GateSettings, GrabPolicy, HashSettings, MailSettings, RebuildSettings, ReconcileSettings,
        StoreSettings, UserLimits, text_or,
    },
    domain::{key_rotation::Staged, order_seal::SealKey, ticket_pass::PassKey},
    secrets::StagedSecret,
};

pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:16379";
/// The local stack's `requirepass` (scripts/stack): the cache requires AUTH locally too.
pub const DEFAULT_REDIS_AUTH_TOKEN: &str = "local-dev-redis-password";
pub const DEFAULT_AWS_ENDPOINT: &str = "http://127.0.0.1:14566";
pub const DEFAULT_HASH_SECRET: &str = "local-dev-hash-secret-not-for-production";
pub const DEFAULT_ORDER_KEY: &str = "local-dev-order-key-not-for-production";
pub const DEFAULT_PASS_KEY: &str = "local-dev-pass-key-not-for-production";
/// The documented development secret of the runner's JWT authorizer.
pub const DEFAULT_JWT_SECRET: &str = "local-dev-jwt-secret-not-for-production";

/// The development secrets under the Secrets Manager names `env.json` gives `sam local invoke` (a
/// deployment's template generates its own): provisioned into the emulator, so the functions in a
/// container read the values the runner and the tests use, and a verify hash, a sealed order or a
/// ticket pass made by one is good in the other.
pub fn development_secrets() -> [(&'static str, String); 4] {
    let pass = text_or("PASS_KEY", DEFAULT_PASS_KEY);
    // The public half, as mail publishes it (the door and query read only this one).
    let public = PassKey::new(pass.as_bytes())
        .map(|k| serde_json::json!({ "current": k.public().encoded(), "previous": null }).to_string())
        .unwrap_or_default();
    [
        ("ticketgrab-hash-secret", text_or("HASH_SECRET", DEFAULT_HASH_SECRET)),
        ("ticketgrab-order-key", text_or("ORDER_KEY", DEFAULT_ORDER_KEY)),
        ("ticketgrab-pass-key", pass),
        ("ticketgrab-pass-public-keys", public),
    ]
}

/// The runner's settings: the functions' own settings types, read by the same functions with the
/// same defaults; only what a laptop must have without any variable set has a local default here
/// (the stack's addresses, its AUTH token, the development secrets).
#[derive(Debug, Clone)]
pub struct LocalSettings {
    /// The cache (`REDIS_URL`, `REDIS_CLUSTER`, `REDIS_*_MS`, `REDIS_AUTH_TOKEN`), as the functions read it.
    pub gate: GateSettings,
    pub aws_endpoint: String,
    pub region: String,
    /// The table (`TABLE_NAME`), provisioned by the runner.
    pub store: StoreSettings,
    pub queue_name: String,
    /// The mail consumer's sender and times (`MAIL_*`, as the mail function reads them).
    pub mail: MailSettings,
    /// Where the mail consumer reaches SES, when not at `aws_endpoint` (a fault test's slow SES).
    pub mail_endpoint: Option<String>,
    pub hash: HashSettings,
    /// Seals order messages (grab, reconcile) and checks them (mail).
    pub seal: SealKey,
    /// Signs ticket passes (mail) and checks them at the door (release); query publishes its public half.
    pub pass: PassKey,
    pub jwt_secret: String,
    pub policy: GrabPolicy,
    /// Requests per user and window on each route (the route table's limits).
    pub user_limits: UserLimits,
    pub rebuild: shared::recovery::RebuildSettings,
    /// Reconcile's outbox ages (`RECONCILE_OUTBOX_*`), as the reconcile function reads them.
    pub reconcile: ReconcileSettings,
    /// When the audit calls an order stuck (`ORDER_STUCK_AFTER_SECONDS`), as query reads it.
    pub order_stuck_after: std::time::Duration,
    /// The beacon chains a draw may name: quicknet, `BEACON_CHAIN` when set, and the runner's own
    /// development chain (`LocalChain::development`: no drand server is reachable here).
    pub beacon_chains: Vec<shared::domain::beacon::Chain>,
}

impl LocalSettings {
    /// The order key as the functions hold it (the runner's keys do not rotate).
    pub fn seal_keys(&self) -> StagedSecret<SealKey> {
        StagedSecret::fixed(Staged::only(self.seal.clone()))
    }

    /// The pass key as mail holds it.
    pub fn pass_keys(&self) -> StagedSecret<PassKey> {
        StagedSecret::fixed(Staged::only(self.pass.clone()))
    }

    /// The same variables as a deployment, with the local defaults; a malformed value stops the
    /// runner with its name, as it stops a cold start.
    pub fn from_env() -> Result<Self, ConfigError> {
        let hash = HashSettings::with_secret(&text_or("HASH_SECRET", DEFAULT_HASH_SECRET))?;
        let reconcile = ReconcileSettings::from_env()?;
        let seal = SealKey::new(text_or("ORDER_KEY", DEFAULT_ORDER_KEY).as_bytes())
            .map_err(|reason| ConfigError::Malformed { name: "ORDER_KEY", reason: reason.into() })?;
        let pass = PassKey::new(text_or("PASS_KEY", DEFAULT_PASS_KEY).as_bytes())
            .map_err(|reason| ConfigError::Malformed { name: "PASS_KEY", reason: reason.into() })?;
        let mut gate = GateSettings::for_url(text_or("REDIS_URL", DEFAULT_REDIS_URL))?;
        gate.auth_token.get_or_insert_with(|| DEFAULT_REDIS_AUTH_TOKEN.to_owned());
        Ok(Self {
            gate,
            aws_endpoint: text_or("AWS_ENDPOINT_URL", DEFAULT_AWS_ENDPOINT),
            region: text_or("AWS_REGION", "us-east-1"),
            store: StoreSettings { table_name: text_or("TABLE_NAME", "ticketgrab") },
            queue_name: text_or("ORDERS_QUEUE_NAME", "ticketgrab-orders"),
            mail: MailSettings::for_sender(text_or("MAIL_FROM", "tickets@example.com"))?,
            mail_endpoint: None,
            hash,
            seal,
            pass,
            jwt_secret: text_or("LOCAL_JWT_SECRET", DEFAULT_JWT_SECRET),
            policy: GrabPolicy::from_env()?,
            user_limits: UserLimits::from_env(shared::http::routes::per_user_limits())?,
            order_stuck_after: shared::config::order_stuck_after()?,
            beacon_chains: {
                let mut chains = shared::config::beacon_chains()?;
                chains.push(shared::domain::beacon::LocalChain::development().chain("development"));
                chains
            },
            rebuild: RebuildSettings::from_env()?,
            reconcile,
        })
    }

    /// Where the runner may listen: anywhere with a secret of one's own, only on loopback with the
    /// published development secret (anyone could mint an admin token for it).
    pub fn check_listen_address(&self, addr: std::net::SocketAddr) -> Result<(), String> {
        if !addr.ip().is_loopback() && self.jwt_secret == DEFAULT_JWT_SECRET {
            return Err(format!(
                "refusing to listen on {addr}: LOCAL_JWT_SECRET is the published development secret, so anyone who can reach \
                 the runner could mint an admin token. Listen on 127.0.0.1, or set LOCAL_JWT_SECRET to a secret of your own."
            ));
        }
        Ok(())
    }

    /// The SDK configuration for the emulator: its endpoint, a region and dummy credentials.
    pub async fn sdk_config(&self) -> aws_config::SdkConfig {
        shared::aws::loader()
            .endpoint_url(&self.aws_endpoint)
            .region(aws_config::Region::new(self.region.clone()))
            .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
                "test",
                "test",
                None,
                None,
                "local-runner",
            ))
            .load()
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_development_secret_listens_only_on_loopback() {
        let mut settings = LocalSettings::from_env().unwrap();
        settings.jwt_secret = DEFAULT_JWT_SECRET.into();
        for ok in ["127.0.0.1:3000", "[::1]:3000"] {
            assert!(settings.check_listen_address(ok.parse().unwrap()).is_ok(), "{ok}");
        }
        for refused in ["0.0.0.0:3000", "192.168.1.5:3000", "[::]:3000"] {
            let err = settings.check_listen_address(refused.parse().unwrap()).unwrap_err();
            assert!(err.contains("LOCAL_JWT_SECRET"), "{err}");
        }
        settings.jwt_secret = "a secret of this team's own, long enough".into();
        assert!(settings.check_listen_address("0.0.0.0:3000".parse().unwrap()).is_ok());
    }
}
