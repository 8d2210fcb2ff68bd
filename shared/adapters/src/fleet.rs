//! The warm fleet, applied: provisioned concurrency on the alias of grab and verify-hash through
//! Lambda's API, and the account's limits read for the release's warnings (Lambda's
//! `GetAccountSettings`, SES's `GetAccount`). What to provision, and when, is
//! `domain::warm_fleet`'s; reconcile converges on it every minute (docs/DESIGN.md section 12).

use aws_sdk_lambda::Client as Lambda;

use crate::{
    aws::error_summary,
    settings::{self, ConfigError, Setting},
};
use domain::{
    Event,
    warm_fleet::{self, AccountLimits, DeploymentLimits, FleetSize},
};

/// Where the fleet lives: the two functions and the alias the API invokes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetTargets {
    pub grab: String,
    pub verify_hash: String,
    pub alias: String,
}

/// The alias the template publishes on grab and verify-hash, and the API invokes (`FLEET_ALIAS`'s
/// default).
pub const ALIAS: &str = crate::settings::FLEET_ALIAS.default;

impl FleetTargets {
    /// `GRAB_FUNCTION_NAME` and `VERIFY_HASH_FUNCTION_NAME` (`FLEET_ALIAS`, default [`ALIAS`]);
    /// `None` when the function names are not set: no fleet is kept (the local runner, sam local).
    pub fn from_env() -> Option<Self> {
        let grab = settings::GRAB_FUNCTION_NAME.optional()?;
        let verify_hash = settings::VERIFY_HASH_FUNCTION_NAME.optional()?;
        Some(Self { grab, verify_hash, alias: settings::FLEET_ALIAS.text() })
    }
}

/// The deployment's limits, as the template hands them to release and reconcile; 0 or unset is
/// no limit.
pub fn deployment_limits_from_env() -> Result<DeploymentLimits, ConfigError> {
    let limit =
        |setting: Setting<u32>| -> Result<Option<u32>, ConfigError> { Ok(Some(setting.read()?).filter(|n| *n > 0)) };
    Ok(DeploymentLimits {
        grab_route: limit(settings::GRAB_ROUTE_THROTTLE)?,
        verify_hash_route: limit(settings::VERIFY_HASH_ROUTE_THROTTLE)?,
        stage: limit(settings::STAGE_THROTTLE)?,
        grab_reserved: limit(settings::GRAB_RESERVED_CONCURRENCY)?,
        verify_hash_reserved: limit(settings::VERIFY_HASH_RESERVED_CONCURRENCY)?,
        edge: settings::EDGE.text() == "cloudfront",
    })
}

#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("lambda {call} on {function}: {detail}")]
    Lambda { call: &'static str, function: String, detail: String },
}

/// What one convergence did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Converged {
    pub size: FleetSize,
    /// Put or delete calls made: 0 when the fleet was already as wanted.
    pub writes: u32,
}

/// Provisioned concurrency on the alias of grab and verify-hash.
#[derive(Clone)]
pub struct Fleet {
    lambda: Lambda,
    targets: FleetTargets,
    limits: DeploymentLimits,
}

impl Fleet {
    pub fn new(sdk: &aws_config::SdkConfig, targets: FleetTargets, limits: DeploymentLimits) -> Self {
        Self { lambda: Lambda::new(sdk), targets, limits }
    }

    /// A deployment's: `None` when the function names are not set ([`FleetTargets::from_env`]).
    pub fn from_env(sdk: &aws_config::SdkConfig) -> Result<Option<Self>, ConfigError> {
        let limits = deployment_limits_from_env()?;
        Ok(FleetTargets::from_env().map(|targets| Self::new(sdk, targets, limits)))
    }

    /// The fleet every event's open wants at `now` ([`warm_fleet::wanted`]), made so.
    pub async fn keep<'a>(
        &self,
        events: impl IntoIterator<Item = &'a Event>,
        now: time::OffsetDateTime,
    ) -> Result<Converged, FleetError> {
        self.converge(warm_fleet::wanted(events, now, &self.limits)).await
    }

    /// The events the fleet kept at `now` is for, and how long until the last of their windows
    /// closes ([`warm_fleet::warming`]).
    pub fn warming<'a>(
        &self,
        events: impl IntoIterator<Item = &'a Event>,
        now: time::OffsetDateTime,
    ) -> (Vec<&'a domain::EventId>, std::time::Duration) {
        warm_fleet::warming(events, now, &self.limits)
    }

    /// Makes the provisioned fleet `size`: reads each function's, then puts or deletes only where
    /// it differs. A state, not a schedule: a failed run, a cancelled event or two opens at once
    /// need nothing but the next run.
    pub async fn converge(&self, size: FleetSize) -> Result<Converged, FleetError> {
        let mut writes = 0;
        for (function, wanted) in [(&self.targets.grab, size.grab), (&self.targets.verify_hash, size.verify_hash)] {
            if self.provisioned(function).await? == wanted {
                continue;
            }
            writes += 1;
            if wanted == 0 {
                self.lambda
                    .delete_provisioned_concurrency_config()
                    .function_name(function)
                    .qualifier(&self.targets.alias)
                    .send()
                    .await
                    .map_err(|e| failed("DeleteProvisionedConcurrencyConfig", function, error_summary(&e)))?;
            } else {
                let wanted = i32::try_from(wanted).unwrap_or(i32::MAX);
                self.lambda
                    .put_provisioned_concurrency_config()
                    .function_name(function)
                    .qualifier(&self.targets.alias)
                    .provisioned_concurrent_executions(wanted)
                    .send()
                    .await
                    .map_err(|e| failed("PutProvisionedConcurrencyConfig", function, error_summary(&e)))?;
            }
        }
        Ok(Converged { size, writes })
    }

    /// The environments asked for on the function's alias now (0: none configured).
    pub async fn provisioned(&self, function: &str) -> Result<u32, FleetError> {
        let out = self
            .lambda
            .get_provisioned_concurrency_config()
            .function_name(function)
            .qualifier(&self.targets.alias)
            .send()
            .await;
        match out {
            Ok(config) => Ok(config.requested_provisioned_concurrent_executions().unwrap_or(0).max(0) as u32),
            Err(e)
                if e.as_service_error().is_some_and(|s| s.is_provisioned_concurrency_config_not_found_exception()) =>
            {
                Ok(0)
            }
            Err(e) => Err(failed("GetProvisionedConcurrencyConfig", function, error_summary(&e))),
        }
    }
}

fn failed(call: &'static str, function: &str, detail: String) -> FleetError {
    FleetError::Lambda { call, function: function.to_owned(), detail }
}

/// Reads the account's limits for the release's warnings. It never fails a release: what could
/// not be read stays `None`, and the warnings name it.
#[derive(Clone)]
pub struct LimitsReader {
    lambda: Lambda,
    ses: aws_sdk_sesv2::Client,
}

impl LimitsReader {
    pub fn new(sdk: &aws_config::SdkConfig) -> Self {
        Self { lambda: Lambda::new(sdk), ses: aws_sdk_sesv2::Client::new(sdk) }
    }

    pub async fn read(&self) -> AccountLimits {
        let (lambda, ses) = tokio::join!(self.lambda.get_account_settings().send(), self.ses.get_account().send());
        let concurrency = match lambda {
            Ok(out) => out.account_limit().map(|l| l.concurrent_executions().max(0) as u32),
            Err(e) => {
                tracing::warn!(error = %error_summary(&e), "lambda GetAccountSettings failed; the release warns of it");
                None
            }
        };
        let (mail_rate, mail_production) = match ses {
            Ok(out) => (out.send_quota().map(|q| q.max_send_rate()), Some(out.production_access_enabled())),
            Err(e) => {
                tracing::warn!(error = %error_summary(&e), "ses GetAccount failed; the release warns of it");
                (None, None)
            }
        };
        AccountLimits { concurrency, mail_rate, mail_production }
    }
}
