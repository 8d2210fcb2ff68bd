//! The HTTP front: plays API Gateway. Each request is checked by the authorizer, matched to a
//! route, turned into an HTTP API payload 2.0 event and handed to the function's handler.

use std::{net::SocketAddr, sync::Arc};

use aws_lambda_events::apigw::ApiGatewayV2httpRequest;
use axum::{
    Router,
    body::{Body, to_bytes},
    extract::{Request, State},
    response::Response,
};
use base64::{Engine, engine::general_purpose::STANDARD};
use serde_json::{Map, Value, json};
use shared::http::{ApiError, apigw, routes};
use tracing::Instrument;

use crate::{authorizer::Authorizer, esm, functions::Functions};

/// What API Gateway and Lambda answer themselves, in their words, when a request never reaches the
/// function or the function's reply cannot be returned.
fn gateway_says(status: u16, message: &str) -> Response {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(json!({ "message": message }).to_string()))
        .expect("a static response")
}

pub struct Front {
    pub functions: Functions,
    pub authorizer: Authorizer,
    /// The mail function's event source mapping, switched by [`MAIL_CONSUMER_PATH`].
    pub mail_consumer: esm::Switch,
    /// The front's requests in flight: the mapping's pollers yield to a rush.
    pub rush: esm::Rush,
    /// The pages function's handler (no sign-in page of its own here: tokens are pasted).
    pub pages: pages::Pages,
    /// How many times its Lambda timeout a function may run before the runner answers 500, as
    /// Lambda would at 1 (the runner's own). A test whose emulator reads a table of 200,000 items
    /// (MiniStack scans where DynamoDB seeks: ~14 s for a 20,000-row page here) raises it.
    pub patience: u32,
}

/// The runner's own route, not the product's: `GET` says whether the mail function's event source
/// mapping delivers, `PUT {"enabled": false}` holds it and `{"enabled": true}` resumes it, as
/// `aws lambda update-event-source-mapping` does in AWS. Admins only. `loadgen --hold-mail` uses
/// it to measure the grabs with the emulator to themselves.
pub const MAIL_CONSUMER_PATH: &str = "/_local/mail-consumer";

pub fn router(front: Arc<Front>) -> Router {
    Router::new().fallback(dispatch).with_state(front)
}

pub async fn serve(
    listener: tokio::net::TcpListener,
    front: Arc<Front>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(front).into_make_service_with_connect_info::<SocketAddr>())
        .with_graceful_shutdown(shutdown)
        .await
}

async fn dispatch(State(front): State<Arc<Front>>, req: Request) -> Response {
    let request_id = uuid::Uuid::now_v7().to_string();
    let span = tracing::info_span!("request", request_id = %request_id);
    let _in_flight = front.rush.enter();
    async move {
        let (parts, body) = req.into_parts();
        if parts.uri.path() == MAIL_CONSUMER_PATH {
            return to_axum(mail_consumer(&front, &parts, body).await);
        }
        // The pages: public files, no authorizer, as the template's `GET /pages/{file}` route.
        if let Some(file) = parts.uri.path().strip_prefix(pages::PATH_PREFIX)
            && parts.method == http::Method::GET
        {
            return to_axum(match front.pages.answer(file) {
                Ok((reply, _)) => reply,
                Err(e) => e.into_response(),
            });
        }
        let Some((route, params)) = routes::find(parts.method.as_str(), parts.uri.path()) else {
            return to_axum(ApiError::RouteNotFound.into_response());
        };
        // The authorizer guards every route but the public ones, before any handler runs.
        let authorization = parts.headers.get("authorization").and_then(|v| v.to_str().ok());
        let claims = if route.public() {
            None
        } else {
            match front.authorizer.claims(authorization) {
                Ok(c) => Some(c),
                Err(e) => {
                    tracing::info!(route = %route.key(), status = 401, error = %e, "refused by the authorizer");
                    return to_axum(ApiError::Unauthorized("a valid bearer token is required").into_response());
                }
            }
        };
        // Lambda takes at most 6 MB per invocation (API Gateway's own limit, 10 MB, is above it).
        let body = match to_bytes(body, routes::LAMBDA_PAYLOAD_BYTES).await {
            Ok(b) => b,
            Err(_) => return gateway_says(413, "Request Entity Too Large"),
        };
        let event = http_api_event(&parts, &route, &params, claims, &body, &request_id);
        let event: ApiGatewayV2httpRequest = match serde_json::from_value(event) {
            Ok(e) => e,
            Err(e) => {
                tracing::error!(error = %e, "could not build the API Gateway event");
                return to_axum(ApiError::Busy.into_response());
            }
        };
        let call = front.functions.call(route.function, apigw::into_request(event));
        let Ok(reply) = tokio::time::timeout(route.function.timeout() * front.patience.max(1), call).await else {
            // Lambda ends the invocation at the function's timeout; API Gateway answers 500.
            tracing::error!(route = %route.key(), timeout_s = route.function.timeout().as_secs(), "the function timed out");
            return gateway_says(500, "Internal Server Error");
        };
        if reply_bytes(&reply) > routes::LAMBDA_PAYLOAD_BYTES {
            tracing::error!(route = %route.key(), bytes = reply_bytes(&reply), "the reply is over Lambda's 6 MB");
            return gateway_says(500, "Internal Server Error");
        }
        to_axum(reply)
    }
    .instrument(span)
    .await
}

/// The size of the function's reply as Lambda returns it: the body (its JSON string escapes add a
/// little, counted) and the headers.
fn reply_bytes(reply: &lambda_http::Response<lambda_http::Body>) -> usize {
    let body = match reply.body() {
        lambda_http::Body::Text(t) => t.len() + t.bytes().filter(|b| matches!(b, b'"' | b'\\' | b'\n' | b'\r')).count(),
        lambda_http::Body::Binary(b) => b.len().div_ceil(3) * 4,
        _ => 0,
    };
    body + reply.headers().iter().map(|(k, v)| k.as_str().len() + v.len() + 6).sum::<usize>()
}

/// [`MAIL_CONSUMER_PATH`]: the runner's switch of the mail consumer.
async fn mail_consumer(
    front: &Front,
    parts: &http::request::Parts,
    body: Body,
) -> lambda_http::Response<lambda_http::Body> {
    let authorization = parts.headers.get("authorization").and_then(|v| v.to_str().ok());
    let Ok(claims) = front.authorizer.claims(authorization) else {
        return ApiError::Unauthorized("a valid bearer token is required").into_response();
    };
    if !Authorizer::is_admin(&claims) {
        return ApiError::Forbidden.into_response();
    }
    match parts.method.as_str() {
        "GET" => {}
        "PUT" => {
            #[derive(serde::Deserialize)]
            struct Wanted {
                enabled: bool,
            }
            let Ok(body) = to_bytes(body, 1024).await else {
                return ApiError::PayloadTooLarge(1024).into_response();
            };
            match serde_json::from_slice::<Wanted>(&body) {
                Ok(wanted) => {
                    front.mail_consumer.set(wanted.enabled).await;
                    tracing::info!(enabled = wanted.enabled, "the mail consumer was switched");
                }
                Err(_) => {
                    return ApiError::BadRequest(r#"the body is {"enabled": true} or {"enabled": false}"#.into())
                        .into_response();
                }
            }
        }
        _ => return ApiError::RouteNotFound.into_response(),
    }
    shared::http::reply::json(http::StatusCode::OK, &json!({ "enabled": front.mail_consumer.enabled() }))
}

/// The HTTP API payload 2.0 event API Gateway would send for this request.
fn http_api_event(
    parts: &http::request::Parts,
    route: &routes::Route,
    params: &[(&'static str, String)],
    claims: Option<std::collections::BTreeMap<String, String>>,
    body: &[u8],
    request_id: &str,
) -> Value {
    let mut headers = Map::new();
    for (name, value) in &parts.headers {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        match headers.get_mut(name.as_str()) {
            Some(Value::String(existing)) => {
                existing.push(',');
                existing.push_str(&value);
            }
            _ => {
                headers.insert(name.as_str().to_owned(), Value::String(value));
            }
        }
    }
    let query = parts.uri.query().unwrap_or_default();
    let query_params: Map<String, Value> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_owned(), Value::String(v.to_owned()))
        })
        .collect();
    let path_params: Map<String, Value> =
        params.iter().map(|(k, v)| ((*k).to_owned(), Value::String(v.clone()))).collect();
    let now = time::OffsetDateTime::now_utc();
    let (body, base64) = match std::str::from_utf8(body) {
        _ if body.is_empty() => (Value::Null, false),
        Ok(text) => (Value::String(text.to_owned()), false),
        Err(_) => (Value::String(STANDARD.encode(body)), true),
    };
    let mut event = json!({
        "version": "2.0",
        "routeKey": route.key(),
        "rawPath": parts.uri.path(),
        "rawQueryString": query,
        "headers": headers,
        "queryStringParameters": if query_params.is_empty() { Value::Null } else { Value::Object(query_params) },
        "pathParameters": if path_params.is_empty() { Value::Null } else { Value::Object(path_params) },
        "requestContext": {
            "accountId": "000000000000",
            "apiId": "local",
            "domainName": parts.headers.get("host").and_then(|h| h.to_str().ok()).unwrap_or("localhost"),
            "domainPrefix": "local",
            "http": {
                "method": parts.method.as_str(),
                "path": parts.uri.path(),
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": parts.headers.get("user-agent").and_then(|h| h.to_str().ok()).unwrap_or(""),
            },
            "requestId": request_id,
            "routeKey": route.key(),
            "stage": "$default",
            "time": shared::domain::event::rfc3339(now),
            "timeEpoch": now.unix_timestamp() * 1000,
        },
        "body": body,
        "isBase64Encoded": base64,
    });
    // A route without an authorizer has no authorizer context (API Gateway's event).
    if let Some(claims) = claims {
        event["requestContext"]["authorizer"] = json!({ "jwt": { "claims": claims, "scopes": null } });
    }
    event
}

fn to_axum(response: lambda_http::Response<lambda_http::Body>) -> Response {
    let (parts, body) = response.into_parts();
    let bytes: Vec<u8> = match body {
        lambda_http::Body::Empty => Vec::new(),
        lambda_http::Body::Text(t) => t.into_bytes(),
        lambda_http::Body::Binary(b) => b,
        _ => Vec::new(),
    };
    Response::from_parts(parts, Body::from(bytes))
}
