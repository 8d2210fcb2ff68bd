//! The HTTP API's routes (DESIGN.md section 4): the one table the local runner serves and the
//! template is checked against.

/// Which function serves a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Function {
    Release,
    Query,
    VerifyHash,
    Grab,
}

impl Function {
    pub fn name(self) -> &'static str {
        match self {
            Self::Release => "release",
            Self::Query => "query",
            Self::VerifyHash => "verify-hash",
            Self::Grab => "grab",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub method: &'static str,
    /// The path with `{id}` placeholders, as API Gateway writes it.
    pub path: &'static str,
    pub function: Function,
}

impl Route {
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

pub const ROUTES: [Route; 13] = [
    Route { method: "POST", path: "/admin/events", function: Function::Release },
    Route { method: "GET", path: "/events", function: Function::Query },
    Route { method: "GET", path: "/events/{id}", function: Function::Query },
    Route { method: "GET", path: "/events/{id}/verify-hash", function: Function::VerifyHash },
    Route { method: "POST", path: "/events/{id}/grab", function: Function::Grab },
    Route { method: "GET", path: "/events/{id}/order", function: Function::Query },
    Route { method: "GET", path: "/admin/events/{id}/orders", function: Function::Query },
    Route { method: "DELETE", path: "/events/{id}/order", function: Function::Grab },
    Route { method: "POST", path: "/events/{id}/waitlist", function: Function::Grab },
    Route { method: "GET", path: "/events/{id}/waitlist", function: Function::Grab },
    Route { method: "GET", path: "/events/{id}/pass-key", function: Function::Query },
    Route { method: "POST", path: "/admin/events/{id}/check-in", function: Function::Release },
    Route { method: "GET", path: "/admin/events/{id}/report", function: Function::Query },
];

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
    }
}
