//! The verify-hash function: builds its dependencies once per execution environment and lends them to
//! every request; the handler lives in `shared::handlers::verify_hash`.

use lambda_http::{Error, Request, service_fn};
use shared::handlers::verify_hash::VerifyHash;

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::telemetry::init();
    let handler = VerifyHash::from_env().await?;
    let handler = &handler;
    lambda_http::run(service_fn(move |req: Request| async move { Ok::<_, Error>(handler.handle(req).await) })).await
}
