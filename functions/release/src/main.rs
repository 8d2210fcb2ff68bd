//! The release function. It takes both an HTTP API event (`POST /admin/events`) and a direct
//! invocation payload (`events/release-direct.json`), so it runs on `lambda_runtime` with a raw
//! JSON payload; the handler lives in `shared::handlers::release`.

// The SDK's nested futures exceed the default query depth when their layout is computed here.
#![recursion_limit = "256"]

use lambda_runtime::{Diagnostic, Error, LambdaEvent, service_fn};
use serde_json::Value;
use shared::handlers::release::Release;

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::telemetry::init();
    let release = Release::from_env().await?;
    let release = &release;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        // A refusal's errorType is its code (INVALID_EVENT, EVENT_EXISTS, BUSY).
        release.handle_invocation(event.payload).await.map_err(Diagnostic::from)
    }))
    .await
}
