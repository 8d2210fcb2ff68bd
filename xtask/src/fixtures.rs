//! The sample HTTP events in `events/`: each file's own parts (its route, path parameters, query,
//! body and who calls) are the author's; everything else (the raw path and query, the method, the
//! request context, the headers, the caller's claims) is written here from them, as API Gateway's
//! payload 2.0 has it, and the route must be a row of the route table (or the pages').

use std::path::{Path, PathBuf};

use serde_json::Value;
use shared::http::routes::ROUTES;

/// A JSON value whose objects keep the order they are written in.
enum J {
    S(String),
    N(i64),
    B(bool),
    Null,
    O(Vec<(String, J)>),
}

fn s(v: &str) -> J {
    J::S(v.to_owned())
}

fn o(fields: Vec<(&str, J)>) -> J {
    J::O(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// As Python's `json.dumps(v, indent=2)`, which wrote the files first.
fn write(v: &J, indent: usize, out: &mut String) {
    match v {
        J::S(t) => out.push_str(&serde_json::to_string(t).expect("a string")),
        J::N(n) => out.push_str(&n.to_string()),
        J::B(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Null => out.push_str("null"),
        J::O(fields) if fields.is_empty() => out.push_str("{}"),
        J::O(fields) => {
            out.push_str("{\n");
            for (i, (k, v)) in fields.iter().enumerate() {
                out.push_str(&" ".repeat(indent + 2));
                out.push_str(&serde_json::to_string(k).expect("a key"));
                out.push_str(": ");
                write(v, indent + 2, out);
                out.push_str(if i + 1 < fields.len() { ",\n" } else { "\n" });
            }
            out.push_str(&" ".repeat(indent));
            out.push('}');
        }
    }
}

/// Who calls: a fan (in the groups the file names, a door's staff say), an organiser, or nobody
/// (no token).
#[derive(Clone, PartialEq)]
enum Caller {
    Fan { groups: Option<String> },
    Admin,
    Nobody,
}

impl Caller {
    fn of(event: &Value) -> Self {
        let claims = &event["requestContext"]["authorizer"]["jwt"]["claims"];
        match claims["cognito:groups"].as_str() {
            _ if claims.is_null() => Self::Nobody,
            Some("[admin]") => Self::Admin,
            groups => Self::Fan { groups: groups.map(str::to_owned) },
        }
    }

    fn authorizer(&self) -> Option<J> {
        let issuer = s("https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_EXAMPLE");
        let fan = |groups: Option<&String>| {
            let mut c = vec![
                ("sub", s("3f9c2a1e-8b7d-4c6e-9a5f-1b2c3d4e5f60")),
                ("email", s("student@example.com")),
                ("email_verified", s("true")),
                ("iss", s("https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_EXAMPLE")),
                ("exp", s("1924992000")),
                ("iat", s("1795000000")),
                ("token_use", s("id")),
            ];
            if let Some(g) = groups {
                c.push(("cognito:groups", s(g)));
            }
            o(c)
        };
        let claims = match self {
            Self::Nobody => return None,
            Self::Fan { groups } => fan(groups.as_ref()),
            Self::Admin => o(vec![
                ("sub", s("7a1b2c3d-0000-4000-8000-00000000ad01")),
                ("email", s("organiser@example.com")),
                ("cognito:groups", s("[admin]")),
                ("iss", issuer),
                ("exp", s("1924992000")),
                ("token_use", s("id")),
            ]),
        };
        Some(o(vec![("jwt", o(vec![("claims", claims), ("scopes", J::Null)]))]))
    }
}

/// A path segment as it travels in a URL (RFC 3986's unreserved characters kept).
fn escaped(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The strings of an object the author wrote (path parameters, query), in their order.
fn strings(v: &Value, what: &str, file: &str) -> Result<Vec<(String, String)>, String> {
    match v {
        Value::Null => Ok(Vec::new()),
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| {
                v.as_str().map(|v| (k.clone(), v.to_owned())).ok_or(format!("{file}: {what}.{k} is no string"))
            })
            .collect(),
        _ => Err(format!("{file}: {what} is no object")),
    }
}

fn http_event(file: &str, event: &Value) -> Result<String, String> {
    let key = event["routeKey"].as_str().ok_or(format!("{file}: no routeKey"))?;
    let known = ROUTES.iter().any(|r| r.key() == key) || key == pages::ROUTE_KEY;
    if !known {
        return Err(format!("{file}: {key} is no route of the route table (shared/src/http/routes.rs)"));
    }
    let (method, template) = key.split_once(' ').ok_or(format!("{file}: {key} is no route key"))?;
    let params = strings(&event["pathParameters"], "pathParameters", file)?;
    let query = strings(&event["queryStringParameters"], "queryStringParameters", file)?;
    let mut path = template.to_owned();
    for (name, value) in &params {
        path = path.replace(&format!("{{{name}}}"), &escaped(value));
    }
    if path.contains('{') {
        return Err(format!("{file}: {key} needs a path parameter the file lacks"));
    }
    let raw_query = query.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&");
    let body = event["body"].as_str();
    let browser = key == pages::ROUTE_KEY;
    let agent = if browser { "Mozilla/5.0" } else { "curl/8.5.0" };
    let mut headers = vec![("accept", s(if browser { "text/html" } else { "application/json" }))];
    if body.is_some() {
        headers.push(("content-type", s("application/json")));
    }
    headers.push(("host", s("abc123.execute-api.eu-west-1.amazonaws.com")));
    headers.push(("user-agent", s(agent)));

    let mut context = vec![("accountId", s("123456789012")), ("apiId", s("abc123"))];
    if let Some(authorizer) = Caller::of(event).authorizer() {
        context.push(("authorizer", authorizer));
    }
    context.extend([
        ("domainName", s("abc123.execute-api.eu-west-1.amazonaws.com")),
        ("domainPrefix", s("abc123")),
        (
            "http",
            o(vec![
                ("method", s(method)),
                ("path", s(&path)),
                ("protocol", s("HTTP/1.1")),
                ("sourceIp", s("203.0.113.7")),
                ("userAgent", s(agent)),
            ]),
        ),
        ("requestId", s("JKJaXmPLvHcESHA=")),
        ("routeKey", s(key)),
        ("stage", s("$default")),
        ("time", s("22/Nov/2026:10:00:00 +0000")),
        ("timeEpoch", J::N(1_795_341_600_000)),
    ]);
    let mut fields = vec![
        ("version", s("2.0")),
        ("routeKey", s(key)),
        ("rawPath", s(&path)),
        ("rawQueryString", s(&raw_query)),
        ("headers", o(headers)),
        ("requestContext", o(context)),
        ("isBase64Encoded", J::B(false)),
    ];
    let object = |pairs: &[(String, String)]| J::O(pairs.iter().map(|(k, v)| (k.clone(), s(v))).collect());
    if !query.is_empty() {
        fields.push(("queryStringParameters", object(&query)));
    }
    if !params.is_empty() {
        fields.push(("pathParameters", object(&params)));
    }
    if let Some(body) = body {
        fields.push(("body", s(body)));
    }
    let mut out = String::new();
    write(&o(fields), 0, &mut out);
    Ok(out + "\n")
}

pub fn generate(root: &Path) -> Result<Vec<(PathBuf, String)>, String> {
    let dir = root.join("events");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("events/: {e}"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let name = format!("events/{}", path.file_name().unwrap_or_default().to_string_lossy());
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{name}: {e}"))?;
        let event: Value = serde_json::from_str(&text).map_err(|e| format!("{name}: {e}"))?;
        if event.get("routeKey").is_some() {
            out.push((path, http_event(&name, &event)?));
        }
    }
    Ok(out)
}
