//! The verify-hash function: builds its dependencies once per execution environment and lends them to
//! every request; the handler lives in `shared::handlers::verify_hash`.

use lambda_http::Error;
use shared::handlers::verify_hash::VerifyHash;

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::telemetry::init();
    shared::http::lambda::run(VerifyHash::from_env().await?).await
}
