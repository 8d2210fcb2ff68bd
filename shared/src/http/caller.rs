//! Who is calling: the claims the HTTP API's JWT authorizer validated (or the local runner, playing
//! it). Nothing else in a request identifies a user.

use lambda_http::{Request, RequestExt, request::RequestContext};

use super::ApiError;
use crate::domain::{Email, UserId};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub user: UserId,
    /// Where mail goes; `None` when the token carries no usable `email` claim.
    pub email: Option<Email>,
    /// The identity provider verified `email` (Cognito's `email_verified` claim).
    pub email_verified: bool,
    pub admin: bool,
    /// In the `staff` group: may check tickets in at every event's door, nothing else of the admin
    /// routes.
    pub staff: bool,
    /// The events whose door the caller staffs (groups `staff-<event id>`): check-in there only.
    pub staff_of: Vec<crate::domain::EventId>,
}

impl Caller {
    /// The caller of a request, or 401 when the authorizer put no usable claims in it.
    pub fn from_request(req: &Request) -> Result<Self, ApiError> {
        let claims = match req.request_context_ref() {
            Some(RequestContext::ApiGatewayV2(ctx)) => {
                ctx.authorizer.as_ref().and_then(|a| a.jwt.as_ref()).map(|j| &j.claims)
            }
            _ => None,
        };
        let claims = claims.ok_or(ApiError::Unauthorized("sign in first: the request carries no token claims"))?;
        let user = claims
            .get("sub")
            .and_then(|s| UserId::parse(s).ok())
            .ok_or(ApiError::Unauthorized("the token's sub claim is missing or not a valid user id"))?;
        let email = claims.get("email").and_then(|e| Email::parse(e).ok());
        // API Gateway hands every claim over as a string.
        let email_verified = claims.get("email_verified").is_some_and(|v| v.trim() == "true");
        let in_group = |name: &str| claims.get("cognito:groups").is_some_and(|g| groups(g).any(|g| g == name));
        let (admin, staff) = (in_group("admin"), in_group("staff"));
        let staff_of = claims
            .get("cognito:groups")
            .map(|g| {
                groups(g)
                    .filter_map(|g| g.strip_prefix(STAFF_OF_PREFIX))
                    .filter_map(|e| crate::domain::EventId::parse(e).ok())
                    .collect()
            })
            .unwrap_or_default();
        Ok(Self { user, email, email_verified, admin, staff, staff_of })
    }

    /// Whether the caller may check tickets in at `event`'s door: an admin, the `staff` group, or
    /// that event's own staff group.
    pub fn staffs(&self, event: &crate::domain::EventId) -> bool {
        self.admin || self.staff || self.staff_of.contains(event)
    }

    /// The address a confirmation may go to: present and verified by the identity provider, since
    /// an unverified address could be anyone's (a user pool lets users change it).
    pub fn verified_email(&self) -> Result<&Email, ApiError> {
        let email = self
            .email
            .as_ref()
            .ok_or(ApiError::Unauthorized("the token carries no email claim; the confirmation needs one"))?;
        if !self.email_verified {
            return Err(ApiError::EmailNotVerified);
        }
        Ok(email)
    }

    pub fn require_admin(req: &Request) -> Result<Self, ApiError> {
        let caller = Self::from_request(req)?;
        if !caller.admin {
            return Err(ApiError::Forbidden);
        }
        Ok(caller)
    }
}

/// A group naming one event's door staff: `staff-<event id>` (Cognito group names cannot hold `:`
/// everywhere a claim travels, `-` they can).
pub const STAFF_OF_PREFIX: &str = "staff-";

/// The groups claim as the HTTP API hands it over: `"[admin editors]"`, a JSON array
/// `["admin","editors"]`, or a plain `"admin"` / `"admin,editors"`.
pub fn groups(claim: &str) -> impl Iterator<Item = &str> {
    claim
        .trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split([' ', ',', '"'])
        .map(str::trim)
        .filter(|g| !g.is_empty())
}

#[cfg(test)]
mod tests {
    use super::groups;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2_000))]
        /// A groups claim in any form: never a panic, and admin only where the claim names it.
        #[test]
        fn admin_only_where_the_claim_names_it(claim in "\\PC{0,60}|[\\[\\]\" ,a-z]{0,40}") {
            let found = groups(&claim).any(|g| g == "admin");
            proptest::prop_assert!(!found || claim.contains("admin"));
            let listed = format!("[{} admin]", claim.replace(['[', ']', ' ', ',', '"'], ""));
            proptest::prop_assert!(groups(&listed).any(|g| g == "admin"), "{}", listed);
        }
    }

    #[test]
    fn groups_arrive_in_every_form_the_http_api_uses() {
        for claim in ["[admin editors]", r#"["editors","admin"]"#, "admin", "editors,admin", "[admin]"] {
            assert!(groups(claim).any(|g| g == "admin"), "{claim}");
        }
        for claim in ["[]", "[administrators]", r#"["not-admin"]"#, ""] {
            assert!(!groups(claim).any(|g| g == "admin"), "{claim}");
        }
    }
}
