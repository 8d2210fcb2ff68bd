//! The pages people look at, served by the pages function at `/pages/<file>` (and by the local
//! runner at the same paths): the organiser's live page, the door's scanner (an installable page
//! that works offline), and the API reference (openapi.yaml in Swagger UI). Every file is compiled
//! in: the pages' own (`web/pages/`), the contract, and what they bundle from npm, pinned by
//! `web/package-lock.json`. Nothing is fetched from elsewhere at run time, and the pages hold no
//! data: they call the API with the token the person signs in with (docs/DESIGN.md section 12).

use lambda_http::{Body, Request, RequestExt, Response, http::StatusCode};
use serde_json::json;
use shared::http::{ApiError, serve};

/// Where the pages live, beside the API's routes.
pub const PATH_PREFIX: &str = "/pages/";
/// The one route that serves them (API Gateway's route key; no authorizer).
pub const ROUTE_KEY: &str = "GET /pages/{file}";

/// One file a page is made of.
pub struct File {
    pub name: &'static str,
    pub content_type: &'static str,
    pub body: &'static [u8],
    /// Bundled from npm: it changes only with the lock file, so browsers may keep it a day.
    pub vendored: bool,
}

macro_rules! own {
    ($name:literal, $type:expr) => {
        File { name: $name, content_type: $type, body: include_bytes!(concat!("../pages/", $name)), vendored: false }
    };
}
macro_rules! npm {
    ($name:literal, $path:literal, $type:expr) => {
        File {
            name: $name,
            content_type: $type,
            body: include_bytes!(concat!("../node_modules/", $path)),
            vendored: true,
        }
    };
}

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

pub const FILES: &[File] = &[
    own!("organiser.html", HTML),
    own!("organiser.js", JS),
    own!("door.html", HTML),
    own!("door.js", JS),
    own!("door-sw.js", JS),
    own!("door.webmanifest", "application/manifest+json"),
    own!("door-icon.svg", "image/svg+xml"),
    own!("reference.html", HTML),
    own!("reference.js", JS),
    own!("sign-in.js", JS),
    own!("pages.css", CSS),
    File {
        name: "openapi.yaml",
        content_type: "application/yaml; charset=utf-8",
        body: include_bytes!("../../openapi.yaml"),
        vendored: false,
    },
    npm!("swagger-ui-bundle.js", "swagger-ui-dist/swagger-ui-bundle.js", JS),
    npm!("swagger-ui.css", "swagger-ui-dist/swagger-ui.css", CSS),
    npm!("jsQR.js", "jsqr/dist/jsQR.js", JS),
];

/// The file with this name.
pub fn file(name: &str) -> Option<&'static File> {
    FILES.iter().find(|f| f.name == name)
}

/// Where the pages send a person to sign in, besides pasting a token: the deployment's Cognito
/// hosted UI, when the template gave one.
#[derive(Debug, Clone, Default)]
pub struct SignIn {
    /// `https://<prefix>.auth.<region>.amazoncognito.com`
    pub hosted_ui: Option<String>,
    pub client_id: Option<String>,
}

impl SignIn {
    /// `COGNITO_HOSTED_UI` and `USER_POOL_CLIENT_ID`, both or neither.
    pub fn from_env() -> Self {
        use shared::settings::{COGNITO_HOSTED_UI, USER_POOL_CLIENT_ID};
        match (COGNITO_HOSTED_UI.optional(), USER_POOL_CLIENT_ID.optional()) {
            (Some(hosted_ui), Some(client_id)) => Self { hosted_ui: Some(hosted_ui), client_id: Some(client_id) },
            _ => Self::default(),
        }
    }
}

#[derive(Clone, Default)]
pub struct Pages {
    sign_in: SignIn,
}

impl Pages {
    pub fn new(sign_in: SignIn) -> Self {
        Self { sign_in }
    }

    /// The function's entry: the `{file}` path parameter names the file.
    pub async fn handle(&self, req: Request) -> Response<Body> {
        serve("pages", req, |req| async move {
            let name = req.path_parameters_ref().and_then(|p| p.first("file")).unwrap_or_default().to_owned();
            self.answer(&name)
        })
        .await
    }

    /// The reply for `/pages/<name>`: the file, `config.json` (how to sign in here), or `404`.
    pub fn answer(&self, name: &str) -> Result<(Response<Body>, &'static str), ApiError> {
        if name == "config.json" {
            let config = json!({
                "cognito": self.sign_in.hosted_ui.as_ref().map(|ui| json!({
                    "hosted_ui": ui,
                    "client_id": self.sign_in.client_id,
                })),
            });
            return Ok((shared::http::json(StatusCode::OK, &config), "OK"));
        }
        let file = file(name).ok_or(ApiError::RouteNotFound)?;
        let body = match std::str::from_utf8(file.body) {
            Ok(text) => Body::Text(text.to_owned()),
            Err(_) => Body::Binary(file.body.to_vec()),
        };
        let mut reply = Response::builder()
            .status(StatusCode::OK)
            .header("content-type", file.content_type)
            .header("x-content-type-options", "nosniff")
            .header("cache-control", if file.vendored { "public, max-age=86400" } else { "no-cache" });
        if file.content_type == HTML {
            // Same-origin scripts only; the camera's frames are blobs; Swagger UI styles inline.
            // The door renews its sign-in at the hosted UI's token endpoint: that origin too.
            let token_endpoint = self.sign_in.hosted_ui.as_deref().map(|ui| format!(" {}", ui.trim_end_matches('/')));
            reply = reply.header(
                "content-security-policy",
                format!(
                    "default-src 'self'; img-src 'self' data: blob:; media-src 'self' blob:; \
                     style-src 'self' 'unsafe-inline'; connect-src 'self'{}; frame-ancestors 'none'; base-uri 'none'",
                    token_endpoint.unwrap_or_default()
                ),
            );
        }
        Ok((reply.body(body).unwrap_or_default(), "OK"))
    }
}

impl shared::http::lambda::HttpFunction for Pages {
    fn respond(&self, req: Request) -> impl std::future::Future<Output = Response<Body>> + Send {
        self.handle(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_a_page_names_is_served() {
        for page in FILES.iter().filter(|f| f.content_type == HTML || f.name.ends_with(".webmanifest")) {
            let text = std::str::from_utf8(page.body).unwrap();
            for attr in ["src=\"", "href=\"", "\"src\": \""] {
                for part in text.split(attr).skip(1) {
                    let target = part.split('"').next().unwrap();
                    if target.starts_with('#') || target.contains("://") {
                        continue;
                    }
                    assert!(file(target).is_some() || target == "config.json", "{} names {target}", page.name);
                }
            }
        }
    }

    #[test]
    fn an_unknown_file_is_a_problem_and_the_config_says_how_to_sign_in() {
        let pages = Pages::default();
        assert!(matches!(pages.answer("../Cargo.toml"), Err(ApiError::RouteNotFound)));
        assert!(matches!(pages.answer(""), Err(ApiError::RouteNotFound)));
        let (reply, _) = pages.answer("config.json").unwrap();
        assert_eq!(std::str::from_utf8(reply.body().as_ref()).unwrap(), r#"{"cognito":null}"#);
        let (reply, _) = pages.answer("door.html").unwrap();
        assert!(reply.headers()["content-security-policy"].to_str().unwrap().contains("connect-src 'self';"));
        // With a hosted UI, the door may reach its token endpoint (to renew its sign-in), nothing else.
        let pages = Pages::new(SignIn {
            hosted_ui: Some("https://door.auth.eu-west-1.amazoncognito.com".into()),
            client_id: Some("client".into()),
        });
        let (reply, _) = pages.answer("door.html").unwrap();
        let policy = reply.headers()["content-security-policy"].to_str().unwrap().to_owned();
        assert!(policy.contains("connect-src 'self' https://door.auth.eu-west-1.amazoncognito.com;"), "{policy}");
    }
}
