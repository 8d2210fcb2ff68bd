//! The pages function: serves the organiser's page, the door's scanner and the API reference
//! (`pages`), with no authorizer and no access to anything: the pages call the API themselves.

use lambda_http::{Error, Request, service_fn};
use pages::{Pages, SignIn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::telemetry::init();
    let handler = Pages::new(SignIn::from_env());
    let handler = &handler;
    lambda_http::run(service_fn(move |req: Request| async move { Ok::<_, Error>(handler.handle(req).await) })).await
}
