//! The functions, built once with the local settings: the very handlers the Lambda binaries run.

use shared::{
    config::{PassKeyRingSource, QueueSettings},
    delivery::Courier,
    domain::warm_fleet::DeploymentLimits,
    fleet::LimitsReader,
    gate::Gate,
    handlers::{
        StartError, door::Door, grab::Grab, mail::Mail, query::Query, reconcile::Reconcile, release::Release,
        verify_hash::VerifyHash,
    },
    http::routes::Function,
    queue::OrderQueue,
    recovery::Rebuilder,
    setup::Adapters,
    store::{EventBook, Store},
};

use crate::settings::LocalSettings;

#[derive(Clone)]
pub struct Functions {
    pub release: Release,
    pub door: Door,
    pub query: Query,
    pub verify_hash: VerifyHash,
    pub grab: Grab,
    pub mail: Mail,
    pub reconcile: Reconcile,
    pub gate: Gate,
    pub store: Store,
    pub queue: OrderQueue,
    /// The rebuilder the functions share (its memory of events is theirs).
    pub rebuilder: Rebuilder,
}

impl Functions {
    pub async fn build(settings: &LocalSettings, queue_url: &str) -> Result<Self, StartError> {
        Self::build_on(settings, queue_url, settings.sdk_config().await).await
    }

    /// [`Functions::build`] with SDK settings of the caller's (a test's longer timeouts).
    pub async fn build_on(
        settings: &LocalSettings,
        queue_url: &str,
        sdk: aws_config::SdkConfig,
    ) -> Result<Self, StartError> {
        // The very constructors the functions' `from_env` call, with the runner's settings.
        let adapters = Adapters::new(sdk);
        let gate = Gate::new(&settings.gate)?;
        let store = adapters.store(&settings.store);
        let queue_settings = QueueSettings::for_queue(queue_url.to_owned())?;
        let queue = adapters.orders_queue(&queue_settings);
        let rebuilder = adapters.rebuilder(&store, &gate, queue.clone(), settings.rebuild);
        let (seal, pass) = (settings.seal_keys(), settings.pass_keys());
        Ok(Self {
            // The emulator's account limits; the runner sets no throttle and keeps no fleet.
            release: Release::new(
                store.clone(),
                gate.clone(),
                rebuilder.clone(),
                Courier::new(gate.clone(), queue.clone(), seal.clone()),
                LimitsReader::new(adapters.sdk()),
                DeploymentLimits::default(),
                settings.beacon_chains.clone(),
                settings.hash.receipts.clone(),
            ),
            door: Door::new(
                store.clone(),
                PassKeyRingSource::ready(settings.pass.public().into()),
                settings.user_limits.clone(),
            ),
            query: Query::new(
                store.clone(),
                gate.clone(),
                rebuilder.clone(),
                settings.user_limits.clone(),
                PassKeyRingSource::ready(settings.pass.public().into()),
                settings.order_stuck_after,
            ),
            verify_hash: VerifyHash::new(
                EventBook::new(store.clone()),
                gate.clone(),
                settings.hash.clone(),
                settings.user_limits.clone(),
            ),
            grab: Grab::new(
                gate.clone(),
                adapters.grab_queue(&queue_settings),
                seal.clone(),
                store.clone(),
                settings.hash.clone(),
                settings.policy,
                settings.rebuild,
                settings.user_limits.clone(),
            ),
            reconcile: Reconcile::new(
                store.clone(),
                gate.clone(),
                queue.clone(),
                seal.clone(),
                settings.rebuild,
                settings.reconcile,
                None,
            ),
            mail: Mail::new(
                store.clone(),
                gate.clone(),
                adapters.mailer(&settings.mail, settings.mail_endpoint.as_deref()),
                seal,
                pass,
                settings.mail.clone(),
            ),
            gate,
            store,
            queue,
            rebuilder,
        })
    }

    pub fn rebuilder(&self) -> &Rebuilder {
        &self.rebuilder
    }

    /// Hands an HTTP API request to the function that serves its route.
    pub async fn call(
        &self,
        function: Function,
        req: lambda_http::Request,
    ) -> lambda_http::Response<lambda_http::Body> {
        match function {
            Function::Release => self.release.handle(req).await,
            Function::Query => self.query.handle(req).await,
            Function::VerifyHash => self.verify_hash.handle(req).await,
            Function::Grab => self.grab.handle(req).await,
            Function::Door => self.door.handle(req).await,
        }
    }
}
