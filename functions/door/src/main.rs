//! The door function: builds its dependencies once per execution environment and lends them to
//! every request; the handler lives in `shared::handlers::door`.

use lambda_http::{Error, Request, service_fn};
use shared::handlers::door::Door;

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::telemetry::init();
    let handler = Door::from_env().await?;
    let handler = &handler;
    lambda_http::run(service_fn(move |req: Request| async move { Ok::<_, Error>(handler.handle(req).await) })).await
}
