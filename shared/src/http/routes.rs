//! The HTTP API's routes (docs/DESIGN.md section 4): the one table the local runner serves and the
//! template is checked against.

/// Which function serves a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Function {
    Release,
    Query,
    VerifyHash,
    Grab,
    /// The door's check-in: holds only the public pass keys.
    Door,
}

impl Function {
    pub fn name(self) -> &'static str {
        match self {
            Self::Release => "release",
            Self::Query => "query",
            Self::VerifyHash => "verify-hash",
            Self::Grab => "grab",
            Self::Door => "door",
        }
    }

    /// The function's `Timeout` in template.yaml (a test checks they agree): the local runner ends
    /// a request that runs longer, as Lambda does.
    pub fn timeout(self) -> std::time::Duration {
        std::time::Duration::from_secs(match self {
            Self::Release => 15,
            Self::Query => 10,
            Self::VerifyHash | Self::Grab | Self::Door => 6,
        })
    }

    /// The API invokes its `live` alias, where reconcile provisions the warm fleet around an open
    /// (`fleet`), rather than its latest version.
    pub fn through_alias(self) -> bool {
        matches!(self, Self::Grab | Self::VerifyHash)
    }

    /// Its resource's name in template.yaml.
    pub fn resource(self) -> &'static str {
        match self {
            Self::Release => "ReleaseFunction",
            Self::Query => "QueryFunction",
            Self::VerifyHash => "VerifyHashFunction",
            Self::Grab => "GrabFunction",
            Self::Door => "DoorFunction",
        }
    }
}

/// Lambda's synchronous invocation payload limit, each way (6 MB): a bigger request is refused
/// before the function runs, a bigger response is an error API Gateway answers with 500.
pub const LAMBDA_PAYLOAD_BYTES: usize = 6 * 1024 * 1024;

/// How a route limits one user's requests (SECURITY.md, flooding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// The grab script counts the user's refused grabs in their own field (`GRAB_RATE_LIMIT`).
    GrabScript,
    /// A fixed window per user and route, counted in Redis before anything else is read:
    /// `setting` requests per window (`GRAB_RATE_WINDOW_MS`), `default` when unset.
    PerUser { name: &'static str, setting: &'static str, default: u32 },
    /// The organiser's routes: callers are the deployment's own staff and admins (Cognito groups),
    /// limited by the stage's throttle only.
    Staff,
    /// No caller: anyone may ask, without a token (no user to count). The route's throttle bounds
    /// it, and behind the edge its replies are cached: one request a second per edge cache reaches
    /// the function (docs/DEPLOY.md, "The edge").
    Public,
}

/// The stage's throttle a route spends (template.yaml's `RouteSettings`: each route its own budget,
/// so a flood of one cannot spend another's); each names the template parameter that sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Throttle {
    Grab,
    VerifyHash,
    /// The reads of events, orders and draws, and the pages.
    Read,
    /// The sale's public state (no token).
    State,
    /// The routes after a grab: cancel, the waitlist, a ballot's entry.
    AfterSale,
    Door,
    Admin,
}

impl Throttle {
    /// Its parameter in template.yaml.
    pub fn parameter(self) -> &'static str {
        match self {
            Self::Grab => "GrabThrottle",
            Self::VerifyHash => "VerifyHashThrottle",
            Self::Read => "ReadThrottle",
            Self::State => "StateThrottle",
            Self::AfterSale => "AfterSaleThrottle",
            Self::Door => "DoorThrottle",
            Self::Admin => "AdminThrottle",
        }
    }
}

/// Each route by what it does: what the handlers match on (a route key never is). A variant's name
/// is its route's resource name in template.yaml (`<name>Route`, `cargo xtask gen`): renaming one
/// replaces a deployed route, which API Gateway refuses while the old one holds its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// `POST /admin/events`
    Release,
    /// `GET /events`
    Events,
    /// `GET /events/{id}`
    Event,
    /// `GET /events/{id}/state`: whether the sale is upcoming, open, sold out or over, for anyone
    /// (the edge's state object)
    State,
    /// `GET /events/{id}/verify-hash`
    VerifyHash,
    /// `POST /events/{id}/grab`
    Grab,
    /// `GET /events/{id}/order`
    Order,
    /// `GET /admin/events/{id}/orders`
    Attendees,
    /// `DELETE /events/{id}/order`
    Cancel,
    /// `POST /events/{id}/waitlist`
    JoinWaitlist,
    /// `GET /events/{id}/waitlist`
    Waitlist,
    /// `GET /events/{id}/pass-key`
    PassKey,
    /// `POST /admin/events/{id}/check-in`
    CheckIn,
    /// `GET /admin/events/{id}/check-in`: the door's figures (checked in of tickets), and a holder
    /// found by ticket number or order id
    DoorDesk,
    /// `GET /admin/events/{id}/report`
    Report,
    /// `GET /admin/events/{id}/live`
    Live,
    /// `POST /events/{id}/entry`: enter a ballot
    Enter,
    /// `GET /events/{id}/entry`: one's entry, and after the draw its position and proof
    Entry,
    /// `GET /events/{id}/draw`: the published draw
    PublishedDraw,
    /// `POST /admin/events/{id}/draw`: the organiser reveals the secret and draws
    Draw,
    /// `POST /events/{id}/queue`: join a fair open's queue
    JoinQueue,
    /// `GET /events/{id}/queue`: one's place, and once admitted the admission token
    QueuePlace,
    /// `GET /events/{id}/receipt-key`: the public keys that check an entry's receipt
    ReceiptKey,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub endpoint: Endpoint,
    pub method: &'static str,
    /// The path with `{id}` placeholders, as API Gateway writes it.
    pub path: &'static str,
    pub function: Function,
    pub limit: Limit,
    pub throttle: Throttle,
}

impl Route {
    /// Asked without a token: no authorizer runs (the template's `AuthorizationType: NONE`).
    pub fn public(&self) -> bool {
        self.limit == Limit::Public
    }

    /// `METHOD /path`, API Gateway's route key.
    pub fn key(&self) -> String {
        format!("{} {}", self.method, self.path)
    }

    /// The path parameters when `path` matches this route.
    pub fn matches(&self, method: &str, path: &str) -> Option<Vec<(&'static str, String)>> {
        if !self.method.eq_ignore_ascii_case(method) {
            return None;
        }
        let mut params = Vec::new();
        let mut want = self.path.trim_matches('/').split('/');
        let mut got = path.trim_matches('/').split('/');
        loop {
            match (want.next(), got.next()) {
                (None, None) => return Some(params),
                (Some(w), Some(g)) if w.starts_with('{') && w.ends_with('}') && !g.is_empty() => {
                    params.push((w.trim_matches(|c| c == '{' || c == '}'), g.to_owned()));
                }
                (Some(w), Some(g)) if w == g => {}
                _ => return None,
            }
        }
    }
}

const fn per_user(name: &'static str, setting: &'static str, default: u32) -> Limit {
    Limit::PerUser { name, setting, default }
}

pub const ROUTES: [Route; 23] = [
    Route {
        endpoint: Endpoint::Release,
        method: "POST",
        path: "/admin/events",
        function: Function::Release,
        limit: Limit::Staff,
        throttle: Throttle::Admin,
    },
    Route {
        endpoint: Endpoint::Events,
        method: "GET",
        path: "/events",
        function: Function::Query,
        limit: per_user("events", "RATE_LIMIT_EVENTS", 20),
        throttle: Throttle::Read,
    },
    Route {
        endpoint: Endpoint::Event,
        method: "GET",
        path: "/events/{id}",
        function: Function::Query,
        limit: per_user("event", "RATE_LIMIT_EVENT", 20),
        throttle: Throttle::Read,
    },
    // Public and cacheable: a crowd told "sold out" or "not open yet" here asks nothing more.
    Route {
        endpoint: Endpoint::State,
        method: "GET",
        path: "/events/{id}/state",
        function: Function::Query,
        limit: Limit::Public,
        throttle: Throttle::State,
    },
    Route {
        endpoint: Endpoint::VerifyHash,
        method: "GET",
        path: "/events/{id}/verify-hash",
        function: Function::VerifyHash,
        limit: per_user("verify-hash", "RATE_LIMIT_VERIFY_HASH", 20),
        throttle: Throttle::VerifyHash,
    },
    Route {
        endpoint: Endpoint::Grab,
        method: "POST",
        path: "/events/{id}/grab",
        function: Function::Grab,
        limit: Limit::GrabScript,
        throttle: Throttle::Grab,
    },
    Route {
        endpoint: Endpoint::Order,
        method: "GET",
        path: "/events/{id}/order",
        function: Function::Query,
        limit: per_user("order", "RATE_LIMIT_ORDER", 20),
        throttle: Throttle::Read,
    },
    Route {
        endpoint: Endpoint::Attendees,
        method: "GET",
        path: "/admin/events/{id}/orders",
        function: Function::Query,
        limit: Limit::Staff,
        throttle: Throttle::Admin,
    },
    // Each cancel costs a strongly consistent read and a transaction: fewer.
    Route {
        endpoint: Endpoint::Cancel,
        method: "DELETE",
        path: "/events/{id}/order",
        function: Function::Grab,
        limit: per_user("cancel", "RATE_LIMIT_CANCEL", 5),
        throttle: Throttle::AfterSale,
    },
    // Each join runs a script on the event's slot.
    Route {
        endpoint: Endpoint::JoinWaitlist,
        method: "POST",
        path: "/events/{id}/waitlist",
        function: Function::Grab,
        limit: per_user("join", "RATE_LIMIT_JOIN", 5),
        throttle: Throttle::AfterSale,
    },
    Route {
        endpoint: Endpoint::Waitlist,
        method: "GET",
        path: "/events/{id}/waitlist",
        function: Function::Grab,
        limit: per_user("waitlist", "RATE_LIMIT_WAITLIST", 20),
        throttle: Throttle::AfterSale,
    },
    Route {
        endpoint: Endpoint::PassKey,
        method: "GET",
        path: "/events/{id}/pass-key",
        function: Function::Query,
        limit: per_user("pass-key", "RATE_LIMIT_PASS_KEY", 20),
        throttle: Throttle::Read,
    },
    // The door's routes are staff's, and limited per user all the same: a scanner (or a door team
    // sharing one token) scans about once a second, an offline door's sync sends a burst. The door
    // holds no Redis, so each environment counts (`handlers::limit`).
    Route {
        endpoint: Endpoint::CheckIn,
        method: "POST",
        path: "/admin/events/{id}/check-in",
        function: Function::Door,
        limit: per_user("check-in", "RATE_LIMIT_CHECK_IN", 60),
        throttle: Throttle::Door,
    },
    Route {
        endpoint: Endpoint::DoorDesk,
        method: "GET",
        path: "/admin/events/{id}/check-in",
        function: Function::Door,
        limit: per_user("door", "RATE_LIMIT_DOOR", 10),
        throttle: Throttle::Door,
    },
    Route {
        endpoint: Endpoint::Report,
        method: "GET",
        path: "/admin/events/{id}/report",
        function: Function::Query,
        limit: Limit::Staff,
        throttle: Throttle::Admin,
    },
    // Polled every second by the organiser's page: O(1) reads of the cache, the audit at most
    // every `LIVE_AUDIT_EVERY_MS` per environment.
    Route {
        endpoint: Endpoint::Live,
        method: "GET",
        path: "/admin/events/{id}/live",
        function: Function::Query,
        limit: Limit::Staff,
        throttle: Throttle::Admin,
    },
    // Each entry is a DynamoDB transaction.
    Route {
        endpoint: Endpoint::Enter,
        method: "POST",
        path: "/events/{id}/entry",
        function: Function::Grab,
        limit: per_user("enter", "RATE_LIMIT_ENTER", 5),
        throttle: Throttle::AfterSale,
    },
    Route {
        endpoint: Endpoint::Entry,
        method: "GET",
        path: "/events/{id}/entry",
        function: Function::Query,
        limit: per_user("entry", "RATE_LIMIT_ENTRY", 20),
        throttle: Throttle::Read,
    },
    // The whole draw, recomputed once per environment and then served from memory, a page of
    // 10,000 places at a time (`?from=`): an auditor reads a million entrants' 100 pages in 5 s.
    Route {
        endpoint: Endpoint::PublishedDraw,
        method: "GET",
        path: "/events/{id}/draw",
        function: Function::Query,
        limit: per_user("draw", "RATE_LIMIT_DRAW", 20),
        throttle: Throttle::Read,
    },
    Route {
        endpoint: Endpoint::Draw,
        method: "POST",
        path: "/admin/events/{id}/draw",
        function: Function::Release,
        limit: Limit::Staff,
        throttle: Throttle::Admin,
    },
    // A join is up to three DynamoDB writes (an entry, or after the draw a rank and an entry).
    Route {
        endpoint: Endpoint::JoinQueue,
        method: "POST",
        path: "/events/{id}/queue",
        function: Function::Grab,
        limit: per_user("join-queue", "RATE_LIMIT_JOIN_QUEUE", 5),
        throttle: Throttle::VerifyHash,
    },
    // Polled while a user waits: one read of their entry, the draw from memory.
    Route {
        endpoint: Endpoint::QueuePlace,
        method: "GET",
        path: "/events/{id}/queue",
        function: Function::Grab,
        limit: per_user("queue", "RATE_LIMIT_QUEUE", 20),
        throttle: Throttle::VerifyHash,
    },
    // Served by grab, which holds the receipt key: its public halves need no other right.
    Route {
        endpoint: Endpoint::ReceiptKey,
        method: "GET",
        path: "/events/{id}/receipt-key",
        function: Function::Grab,
        limit: per_user("receipt-key", "RATE_LIMIT_RECEIPT_KEY", 20),
        throttle: Throttle::Read,
    },
];

/// The route a request came by: API Gateway's route key (`METHOD /path`) in its context.
pub fn of_request(req: &lambda_http::Request) -> Option<&'static Route> {
    use lambda_http::{RequestExt, request::RequestContext};
    match req.request_context_ref() {
        Some(RequestContext::ApiGatewayV2(ctx)) => by_key(ctx.route_key.as_deref()?),
        _ => None,
    }
}

/// The route with this API Gateway route key (`METHOD /path`).
pub fn by_key(key: &str) -> Option<&'static Route> {
    ROUTES
        .iter()
        .find(|r| r.method.len() < key.len() && key.starts_with(r.method) && key[r.method.len() + 1..] == *r.path)
}

/// Every per-user limit: (name, setting, default).
pub fn per_user_limits() -> impl Iterator<Item = (&'static str, &'static str, u32)> {
    ROUTES.iter().filter_map(|r| match r.limit {
        Limit::PerUser { name, setting, default } => Some((name, setting, default)),
        _ => None,
    })
}

/// The route serving `method path`, with its path parameters.
pub fn find(method: &str, path: &str) -> Option<(Route, Vec<(&'static str, String)>)> {
    ROUTES.iter().find_map(|r| r.matches(method, path).map(|p| (*r, p)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_find_their_routes_and_parameters() {
        let (route, params) = find("POST", "/events/ev1/grab").unwrap();
        assert_eq!(route.function, Function::Grab);
        assert_eq!(params, [("id", "ev1".to_owned())]);
        assert_eq!(find("GET", "/events").unwrap().0.key(), "GET /events");
        assert_eq!(find("GET", "/admin/events/x/orders").unwrap().0.key(), "GET /admin/events/{id}/orders");
        assert!(find("DELETE", "/events/ev1").is_none());
        assert_eq!(find("DELETE", "/events/ev1/order").unwrap().0.function, Function::Grab);
        assert!(find("GET", "/events/ev1/nope").is_none());
        assert!(find("GET", "/events//order").is_none());
        assert_eq!(by_key("DELETE /events/{id}/order").unwrap().function, Function::Grab);
        assert!(by_key("DELETE /events/{id}").is_none());
    }

    #[test]
    fn each_endpoint_names_one_route() {
        let endpoints: std::collections::HashSet<_> = ROUTES.iter().map(|r| r.endpoint).collect();
        assert_eq!(endpoints.len(), ROUTES.len());
        assert_eq!(by_key("POST /events/{id}/grab").unwrap().endpoint, Endpoint::Grab);
        assert_eq!(by_key("DELETE /events/{id}/order").unwrap().endpoint, Endpoint::Cancel);
    }

    #[test]
    fn every_route_a_user_calls_has_a_limit_of_its_own() {
        for route in ROUTES {
            // The door's routes are staff's and counted per user too.
            let staff = route.path.starts_with("/admin/") && route.function != Function::Door;
            assert_eq!(route.limit == Limit::Staff, staff, "{}", route.key());
        }
        // The one route without a caller answers the same to everyone, nothing of a user's.
        let public: Vec<_> = ROUTES.iter().filter(|r| r.public()).map(|r| r.key()).collect();
        assert_eq!(public, ["GET /events/{id}/state"]);
        let names: Vec<_> = per_user_limits().map(|(name, ..)| name).collect();
        let distinct: std::collections::HashSet<_> = names.iter().collect();
        assert_eq!(distinct.len(), names.len(), "one counter per route");
    }
}
