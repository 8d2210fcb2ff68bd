//! The reconcile function, run every minute by an EventBridge schedule; an admin can also invoke
//! it by hand with `{}`. The handler lives in `shared::handlers::reconcile`.

// The SDK's nested futures exceed the default query depth when their layout is computed here.
#![recursion_limit = "256"]

use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde_json::Value;
use shared::handlers::reconcile::{Reconcile, Trigger};

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::telemetry::init();
    let reconcile = Reconcile::from_env().await?;
    let reconcile = &reconcile;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        let trigger = Trigger::parse(&event.payload)?;
        tracing::info!(?trigger, "reconcile starts");
        Ok::<_, Error>(serde_json::to_value(reconcile.run().await)?)
    }))
    .await
}
