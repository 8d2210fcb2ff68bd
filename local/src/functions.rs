//! The functions, built once with the local settings: the very handlers the Lambda binaries run.

use shared::{
    config::PassKeyRingSource,
    gate::Gate,
    handlers::{
        StartError,
        door::Door,
        grab::Grab,
        mail::Mail,
        query::Query,
        reconcile::{Reconcile, ReconcileSettings},
        release::Release,
        verify_hash::VerifyHash,
    },
    http::routes::Function,
    mailer::Mailer,
    queue::OrderQueue,
    recovery::Rebuilder,
    store::Store,
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
        let sdk = settings.sdk_config().await;
        let gate = Gate::new(&shared::config::GateSettings {
            redis_url: settings.redis_url.clone(),
            cluster: settings.redis_cluster,
            connect_timeout: std::time::Duration::from_millis(500),
            command_timeout: std::time::Duration::from_millis(2000),
            replica_wait: std::time::Duration::from_millis(100),
            auth_token: Some(settings.redis_auth_token.clone()),
        })?;
        let store = Store::new(aws_sdk_dynamodb::Client::new(&sdk), &settings.table_name);
        let queue = OrderQueue::new(aws_sdk_sqs::Client::new(&sdk), queue_url);
        let rebuilder = Rebuilder::new(store.clone(), gate.clone(), queue.clone(), settings.rebuild);
        Ok(Self {
            release: Release::new(store.clone(), gate.clone(), rebuilder.clone()),
            door: Door::new(store.clone(), PassKeyRingSource::ready(settings.pass.public().into())),
            query: Query::new(
                store.clone(),
                gate.clone(),
                rebuilder.clone(),
                settings.user_limits.clone(),
                PassKeyRingSource::ready(settings.pass.public().into()),
            ),
            verify_hash: VerifyHash::new(
                gate.clone(),
                settings.hash.clone(),
                rebuilder.clone(),
                settings.user_limits.clone(),
            ),
            grab: Grab::new(
                gate.clone(),
                OrderQueue::for_grab_within(&sdk, queue_url, settings.grab_send),
                settings.seal.clone(),
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
                settings.seal.clone(),
                settings.rebuild,
                ReconcileSettings { outbox_age: settings.outbox_age, outbox_max_wait: settings.outbox_max_wait },
            ),
            mail: Mail::new(
                store.clone(),
                gate.clone(),
                Mailer::new(
                    Mailer::client(&sdk, settings.mail.send_timeout, settings.mail_endpoint.as_deref()),
                    &settings.mail.from,
                ),
                settings.seal.clone(),
                settings.pass.clone(),
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
