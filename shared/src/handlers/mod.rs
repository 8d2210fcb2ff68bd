//! One file per function: parse -> domain + adapters -> outcome -> reply. Each function's
//! dependencies are a struct built once per execution environment and lent to every request.

pub mod cancel_and_wait;
pub mod door;
pub mod draws;
pub mod grab;
pub mod limit;
pub mod live;
pub mod mail;
pub mod query;
pub mod reconcile;
pub mod release;
pub mod verify_hash;
pub mod warm_up;

pub use crate::setup::StartError;

use std::future::Future;

use lambda_http::{Body, Request, Response};

use crate::http::lambda::HttpFunction;

macro_rules! http_functions {
    ($($handler:ty),*) => {$(
        impl HttpFunction for $handler {
            fn respond(&self, req: Request) -> impl Future<Output = Response<Body>> + Send {
                self.handle(req)
            }
        }
    )*};
}

http_functions!(grab::Grab, verify_hash::VerifyHash, query::Query, door::Door);
