//! hello-lambda: the smallest `lambda_runtime` function, built with the product's release profile:
//! the floor that fn-costs compares every function's cold start and size with.

use lambda_runtime::{Error, LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::run(service_fn(
        |event: LambdaEvent<serde_json::Value>| async move { Ok::<_, Error>(event.payload) },
    ))
    .await
}
