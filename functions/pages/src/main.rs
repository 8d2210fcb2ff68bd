//! The pages function: serves the organiser's page, the door's scanner and the API reference
//! (`pages`), with no authorizer and no access to anything: the pages call the API themselves.

use lambda_http::Error;
use pages::{Pages, SignIn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::telemetry::init();
    shared::http::lambda::run(Pages::new(SignIn::from_env())).await
}
