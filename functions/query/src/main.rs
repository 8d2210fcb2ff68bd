//! The query function: builds its dependencies once per execution environment and lends them to
//! every request; the handler lives in `shared::handlers::query`.

use lambda_http::Error;
use shared::handlers::query::Query;

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::telemetry::init();
    shared::http::lambda::run(Query::from_env().await?).await
}
