//! The reconcile function, run every minute by an EventBridge schedule; an admin can also invoke
//! it by hand with `{}`, and an operator with `{"redrive": "dead-letters"}` to move the DLQ back
//! to the orders queue. The handler lives in `shared::handlers::reconcile`.

// The SDK's nested futures exceed the default query depth when their layout is computed here.
#![recursion_limit = "256"]

use lambda_runtime::{Diagnostic, Error, LambdaEvent, service_fn};
use serde_json::Value;
use shared::handlers::reconcile::{Reconcile, Trigger};

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::telemetry::init();
    let reconcile = Reconcile::from_env().await?;
    let reconcile = &reconcile;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        // A payload that is not the schedule's is refused with errorType INVALID_TRIGGER.
        let trigger = Trigger::parse(&event.payload).map_err(Diagnostic::from)?;
        tracing::info!(?trigger, "reconcile starts");
        let answer = match trigger {
            Trigger::RedriveDeadLetters => serde_json::to_value(
                reconcile
                    .redrive_dead_letters()
                    .await
                    .map_err(|e| Diagnostic { error_type: "REDRIVE_FAILED".into(), error_message: e.to_string() })?,
            ),
            trigger => serde_json::to_value(reconcile.run_alone(&trigger).await),
        };
        answer.map_err(|e| Diagnostic::from(e.to_string()))
    }))
    .await
}
