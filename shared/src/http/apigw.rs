//! API Gateway HTTP API (payload 2.0) events to `http` types and back. Lambda's runtime does this
//! for the HTTP functions; the local runner and release's mixed payloads need it by hand.

use aws_lambda_events::apigw::{ApiGatewayV2httpRequest, ApiGatewayV2httpResponse};
use lambda_http::{Body, Request, Response, request::LambdaRequest};

pub fn into_request(event: ApiGatewayV2httpRequest) -> Request {
    LambdaRequest::ApiGatewayV2(event).into()
}

/// True when a raw invocation payload is an HTTP API event rather than a direct call.
pub fn is_http_api_event(payload: &serde_json::Value) -> bool {
    payload.get("version").and_then(|v| v.as_str()) == Some("2.0") && payload.get("requestContext").is_some()
}

pub fn into_event_response(response: Response<Body>) -> ApiGatewayV2httpResponse {
    let (parts, body) = response.into_parts();
    let mut out = ApiGatewayV2httpResponse::default();
    out.status_code = i64::from(parts.status.as_u16());
    out.headers = parts.headers;
    out.is_base64_encoded = matches!(body, Body::Binary(_));
    out.body = match body {
        Body::Empty => None,
        b => Some(b),
    };
    out
}
