//! One file per function: parse -> domain + adapters -> outcome -> reply. A route with a life of
//! its own has a room instead, one file holding its parsing and handling, and the function that
//! serves it dispatches to it: grab's cancellation (`cancel`) and waitlist (`waitlist`), and the
//! routes of the sales that draw (`draws/`: entry, queue, published draw, the organiser's draw,
//! receipt keys), which grab, query and release serve. Each function's dependencies are a struct
//! built once per execution environment and lent to every request.

pub mod cancel;
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
pub mod waitlist;
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
