//! How an HTTP function serves its invocations on Lambda: one at a time in an on-demand execution
//! environment, up to `AWS_LAMBDA_MAX_CONCURRENCY` at once on Lambda Managed Instances, where Lambda
//! sets it (`lambda_runtime`'s `run_concurrent`, which falls back to one at a time when it is
//! unset). Every function's `main` is this call; the handler is built once per environment and
//! shared by every worker: its Redis connection is multiplexed (one socket carries every task's
//! commands, pipelined), its AWS SDK clients pool their connections, and its per-environment
//! memories (the sold-out memory, the event book, the limiter's counts) sit behind locks.

use std::{future::Future, sync::Arc};

use lambda_http::{Body, Error, Request, Response, service_fn};

/// A function's handler, answering one API Gateway request (each handler implements it, in
/// `handlers`: the edge knows no handler).
pub trait HttpFunction: Send + Sync + 'static {
    fn respond(&self, req: Request) -> impl Future<Output = Response<Body>> + Send;
}

/// Serves `function`'s invocations until the environment ends.
pub async fn run<F: HttpFunction>(function: F) -> Result<(), Error> {
    let function = Arc::new(function);
    lambda_http::run_concurrent(service_fn(move |req: Request| {
        let function = function.clone();
        async move { Ok::<_, Error>(function.respond(req).await) }
    }))
    .await
}
