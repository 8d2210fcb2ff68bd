//! Success replies, request parsing helpers, and the one wrapper that logs every request.

use std::{future::Future, time::Instant};

use lambda_http::{Body, Request, RequestExt, Response, http::StatusCode, request::RequestContext};
use serde::{Serialize, de::DeserializeOwned};

use super::{ApiError, MAX_BODY_BYTES};
use crate::domain::EventId;

pub fn json<T: Serialize>(status: StatusCode, value: &T) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .header("cache-control", "no-store")
        .body(Body::Text(serde_json::to_string(value).unwrap_or_default()))
        .unwrap_or_default()
}

/// The route the HTTP API matched, e.g. `POST /events/{id}/grab`, as the request log names it
/// (handlers match on [`endpoint`]).
pub fn route_key(req: &Request) -> String {
    match req.request_context_ref() {
        Some(RequestContext::ApiGatewayV2(ctx)) => ctx.route_key.clone().unwrap_or_default(),
        _ => String::new(),
    }
}

/// What the request's route does, from the route table: `None` for a route key the table lacks
/// (API Gateway never sends one).
pub fn endpoint(req: &Request) -> Option<crate::http::routes::Endpoint> {
    crate::http::routes::of_request(req).map(|r| r.endpoint)
}

/// The `{id}` path parameter, validated before any I/O.
pub fn event_id(req: &Request) -> Result<EventId, ApiError> {
    let raw = req.path_parameters_ref().and_then(|p| p.first("id")).ok_or(ApiError::RouteNotFound)?;
    EventId::parse(raw).map_err(|e| ApiError::BadRequest(e.to_string()))
}

pub fn query_param<'a>(req: &'a Request, name: &str) -> Option<&'a str> {
    req.query_string_parameters_ref().and_then(|q| q.first(name))
}

/// The body as JSON, refused with 413 past the limit and 400 when it is not JSON.
pub fn json_body<T: DeserializeOwned>(req: &Request) -> Result<T, ApiError> {
    let bytes: &[u8] = req.body().as_ref();
    if bytes.len() > MAX_BODY_BYTES {
        return Err(ApiError::PayloadTooLarge(MAX_BODY_BYTES));
    }
    if bytes.is_empty() {
        return Err(ApiError::BadRequest("a JSON body is required".into()));
    }
    serde_json::from_slice(bytes).map_err(|e| ApiError::BadRequest(format!("the body is not the expected JSON: {e}")))
}

/// Runs one request and writes its one log line: route, status, outcome code and latency. The
/// runtime's span carries the request id. No claim, token or body is logged.
pub async fn serve<F, Fut>(function: &'static str, req: Request, handler: F) -> Response<Body>
where
    F: FnOnce(Request) -> Fut,
    Fut: Future<Output = Result<(Response<Body>, &'static str), ApiError>>,
{
    let started = Instant::now();
    let route = route_key(&req);
    let (response, code) = match handler(req).await {
        Ok(done) => done,
        Err(e) => {
            let code = e.code();
            (e.into_response(), code)
        }
    };
    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
    tracing::info!(function, route = %route, status = response.status().as_u16(), code, latency_ms, "request");
    crate::metrics::outcome(function, code, latency_ms);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(500))]
        /// Any body bytes (up to twice the limit): a clear 400 or 413, never a panic; over the limit
        /// it is refused before it is parsed.
        #[test]
        fn any_body_is_json_or_a_clear_refusal(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..(2 * MAX_BODY_BYTES))) {
            let len = bytes.len();
            let req = lambda_http::Request::new(lambda_http::Body::from(bytes));
            match json_body::<serde_json::Value>(&req) {
                Ok(_) => proptest::prop_assert!(len <= MAX_BODY_BYTES),
                Err(ApiError::PayloadTooLarge(_)) => proptest::prop_assert!(len > MAX_BODY_BYTES),
                Err(ApiError::BadRequest(_)) => proptest::prop_assert!(len <= MAX_BODY_BYTES),
                Err(other) => proptest::prop_assert!(false, "unexpected {other:?}"),
            }
        }
    }
}
