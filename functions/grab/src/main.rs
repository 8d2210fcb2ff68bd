//! The grab function: builds its dependencies once per execution environment and lends them to
//! every request; the handler lives in `shared::handlers::grab`.

use lambda_http::Error;
use shared::handlers::grab::Grab;

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::telemetry::init();
    shared::http::lambda::run(Grab::from_env().await?).await
}
