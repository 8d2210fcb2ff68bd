//! Plays the HTTP API's JWT authorizer: HS256 development tokens signed with `LOCAL_JWT_SECRET`.
//! An invalid, expired or `alg: none` token is refused before any handler runs; a valid one
//! becomes the claims map API Gateway would put in the event (all values strings, groups as
//! `"[admin editors]"`).

use std::collections::BTreeMap;

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation, decode, encode};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DevClaims {
    pub sub: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// Cognito's claim: the address was verified. Minted tokens carry `true` with an address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email_verified: Option<bool>,
    pub exp: u64,
    #[serde(default)]
    pub iat: u64,
    #[serde(rename = "cognito:groups", default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
#[error("invalid token: {0}")]
pub struct TokenError(String);

pub struct Authorizer {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
}

impl Authorizer {
    pub fn new(secret: &str) -> Self {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = 0;
        validation.set_required_spec_claims(&["exp", "sub"]);
        Self {
            encoding: EncodingKey::from_secret(secret.as_bytes()),
            decoding: DecodingKey::from_secret(secret.as_bytes()),
            validation,
        }
    }

    pub fn mint(
        &self,
        sub: &str,
        email: Option<&str>,
        admin: bool,
        ttl: std::time::Duration,
    ) -> Result<String, TokenError> {
        self.mint_in(sub, email, if admin { &["admin"] } else { &[] }, ttl)
    }

    /// A token for a member of the given groups (`admin`, `staff`).
    pub fn mint_in(
        &self,
        sub: &str,
        email: Option<&str>,
        groups: &[&str],
        ttl: std::time::Duration,
    ) -> Result<String, TokenError> {
        let now = time::OffsetDateTime::now_utc().unix_timestamp() as u64;
        self.sign(&DevClaims {
            sub: sub.to_owned(),
            email: email.map(str::to_owned),
            email_verified: email.map(|_| true),
            iat: now,
            exp: now + ttl.as_secs(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        })
    }

    /// Signs any claims, e.g. an already expired token for a test.
    pub fn sign(&self, claims: &DevClaims) -> Result<String, TokenError> {
        encode(&Header::new(Algorithm::HS256), claims, &self.encoding).map_err(|e| TokenError(e.to_string()))
    }

    /// The claims of a valid `Authorization: Bearer` value, as API Gateway hands them to Lambda.
    pub fn claims(&self, authorization: Option<&str>) -> Result<BTreeMap<String, String>, TokenError> {
        let token = authorization
            .and_then(|h| h.strip_prefix("Bearer ").or_else(|| h.strip_prefix("bearer ")))
            .ok_or_else(|| TokenError("no bearer token".into()))?;
        let data = decode::<DevClaims>(token.trim(), &self.decoding, &self.validation)
            .map_err(|e| TokenError(e.to_string()))?;
        let c = data.claims;
        let mut claims = BTreeMap::from([
            ("sub".to_owned(), c.sub),
            ("exp".to_owned(), c.exp.to_string()),
            ("iat".to_owned(), c.iat.to_string()),
        ]);
        if let Some(email) = c.email {
            claims.insert("email".into(), email);
        }
        if let Some(verified) = c.email_verified {
            claims.insert("email_verified".into(), verified.to_string());
        }
        if !c.groups.is_empty() {
            claims.insert("cognito:groups".into(), format!("[{}]", c.groups.join(" ")));
        }
        Ok(claims)
    }
}

impl Authorizer {
    /// Whether claims from [`Authorizer::claims`] put the caller in the `admin` group.
    pub fn is_admin(claims: &BTreeMap<String, String>) -> bool {
        claims.get("cognito:groups").is_some_and(|g| shared::http::caller::groups(g).any(|g| g == "admin"))
    }
}

/// `30s`, `15m`, `1h`, `2d` (or plain seconds).
pub fn parse_ttl(s: &str) -> Result<std::time::Duration, String> {
    let s = s.trim();
    let (n, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = n.parse().map_err(|_| format!("{s:?} is not a duration like 30s, 15m, 1h or 2d"))?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        "d" => n * 86_400,
        _ => return Err(format!("{s:?} is not a duration like 30s, 15m, 1h or 2d")),
    };
    Ok(std::time::Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    #[test]
    fn a_minted_token_yields_api_gateway_style_claims() {
        let auth = Authorizer::new("s3cret-s3cret-s3cret");
        let token = auth.mint("u1", Some("u1@example.com"), true, parse_ttl("1h").unwrap()).unwrap();
        let claims = auth.claims(Some(&format!("Bearer {token}"))).unwrap();
        assert_eq!(claims["sub"], "u1");
        assert_eq!(claims["email"], "u1@example.com");
        assert_eq!(claims["email_verified"], "true");
        assert_eq!(claims["cognito:groups"], "[admin]");
    }

    #[test]
    fn expired_foreign_and_unsigned_tokens_are_refused() {
        let auth = Authorizer::new("s3cret-s3cret-s3cret");
        let expired = auth
            .sign(&DevClaims { sub: "u1".into(), email: None, email_verified: None, exp: 1, iat: 0, groups: vec![] })
            .unwrap();
        assert!(auth.claims(Some(&format!("Bearer {expired}"))).is_err());
        let foreign = Authorizer::new("another-secret-here").mint("u1", None, false, parse_ttl("1h").unwrap()).unwrap();
        assert!(auth.claims(Some(&format!("Bearer {foreign}"))).is_err());
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let none = format!(
            "{}.{}.",
            b64.encode(r#"{"alg":"none","typ":"JWT"}"#),
            b64.encode(r#"{"sub":"u1","exp":9999999999,"cognito:groups":["admin"]}"#)
        );
        assert!(auth.claims(Some(&format!("Bearer {none}"))).is_err());
        assert!(auth.claims(None).is_err());
        assert!(auth.claims(Some("Basic dTE6cA==")).is_err());
    }

    #[test]
    fn ttls_read_like_people_write_them() {
        assert_eq!(parse_ttl("90").unwrap().as_secs(), 90);
        assert_eq!(parse_ttl("15m").unwrap().as_secs(), 900);
        assert_eq!(parse_ttl("2d").unwrap().as_secs(), 172_800);
        assert!(parse_ttl("1w").is_err());
        assert!(parse_ttl("h").is_err());
    }
}
