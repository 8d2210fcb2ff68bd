//! The door function: builds its dependencies once per execution environment and lends them to
//! every request; the handler lives in `shared::handlers::door`.

use lambda_http::Error;
use shared::handlers::door::Door;

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::telemetry::init();
    shared::http::lambda::run(Door::from_env().await?).await
}
