//! template.yaml's copies of the route table (shared/src/http/routes.rs): each function's
//! integration and invoke permission, each route, the stage's throttle per route and the routes
//! the stage waits for.

use shared::http::routes::{Function, ROUTES, Route, Throttle};

use crate::region;

/// A function the API invokes: its resource's name, and whether through its `live` alias.
struct Target {
    resource: &'static str,
    through_alias: bool,
}

impl Target {
    fn of(f: Function) -> Self {
        Self { resource: f.resource(), through_alias: f.through_alias() }
    }

    fn pages() -> Self {
        Self { resource: "PagesFunction", through_alias: false }
    }

    /// `ReleaseFunction` -> `Release`: the stem of its integration's and permission's names.
    fn stem(&self) -> &'static str {
        self.resource.trim_end_matches("Function")
    }

    fn invoked(&self) -> String {
        if self.through_alias {
            format!("!Ref {}.Alias", self.resource)
        } else {
            format!("!GetAtt {}.Arn", self.resource)
        }
    }
}

/// One route as the template declares it (the API's and the pages').
struct Declared {
    name: String,
    key: String,
    public: bool,
    target: Target,
    throttle: Throttle,
}

fn declared() -> Vec<Declared> {
    let mut routes: Vec<Declared> = ROUTES
        .iter()
        .map(|r: &Route| Declared {
            name: format!("{:?}Route", r.endpoint),
            key: r.key(),
            public: r.public(),
            target: Target::of(r.function),
            throttle: r.throttle,
        })
        .collect();
    // The pages are public files (they hold no data; they call the API with the token the person
    // signs in with): no authorizer, the reads' throttle.
    routes.push(Declared {
        name: "PagesRoute".into(),
        key: pages::ROUTE_KEY.into(),
        public: true,
        target: Target::pages(),
        throttle: Throttle::Read,
    });
    routes
}

/// The functions the API invokes, each once, in the order their first route is declared.
fn targets(routes: &[Declared]) -> Vec<&Target> {
    let mut seen: Vec<&Target> = Vec::new();
    for r in routes {
        if !seen.iter().any(|t| t.resource == r.target.resource) {
            seen.push(&r.target);
        }
    }
    seen
}

pub fn generate(text: &str) -> Result<String, String> {
    let routes = declared();
    let mut body = String::new();
    for t in targets(&routes) {
        body += &format!(
            "  {stem}Integration:\n    Type: AWS::ApiGatewayV2::Integration\n    Properties:\n      ApiId: !Ref HttpApi\n      IntegrationType: AWS_PROXY\n      IntegrationUri: {uri}\n      PayloadFormatVersion: \"2.0\"\n",
            stem = t.stem(),
            uri = t.invoked()
        );
    }
    for r in &routes {
        let auth = if r.public {
            "      AuthorizationType: NONE\n".to_owned()
        } else {
            "      AuthorizationType: JWT\n      AuthorizerId: !Ref JwtAuthorizer\n".to_owned()
        };
        body += &format!(
            "  {name}:\n    Type: AWS::ApiGatewayV2::Route\n    Properties:\n      ApiId: !Ref HttpApi\n      RouteKey: {key}\n{auth}      Target: !Sub integrations/${{{stem}Integration}}\n",
            name = r.name,
            key = r.key,
            stem = r.target.stem()
        );
    }
    let text = region::replace(text, "routes", &body)?;

    let mut body = String::new();
    for t in targets(&routes) {
        let function = if t.through_alias { format!("{}.Alias", t.resource) } else { t.resource.to_owned() };
        body += &format!(
            "  {stem}InvokePermission:\n    Type: AWS::Lambda::Permission\n    Properties:\n      Action: lambda:InvokeFunction\n      FunctionName: !Ref {function}\n      Principal: apigateway.amazonaws.com\n      SourceArn: !Sub arn:${{AWS::Partition}}:execute-api:${{AWS::Region}}:${{AWS::AccountId}}:${{HttpApi}}/*\n",
            stem = t.stem()
        );
    }
    let text = region::replace(&text, "invoke permissions", &body)?;

    let body: String = routes.iter().map(|r| format!("      - {}\n", r.name)).collect();
    let text = region::replace(&text, "routes the stage waits for", &body)?;

    let body: String = routes
        .iter()
        .map(|r| {
            let p = r.throttle.parameter();
            format!("        \"{}\": {{ThrottlingRateLimit: !Ref {p}, ThrottlingBurstLimit: !Ref {p}}}\n", r.key)
        })
        .collect();
    region::replace(&text, "throttle per route", &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The template as the repository holds it.
    fn template() -> String {
        std::fs::read_to_string(crate::root().join("template.yaml")).expect("template.yaml")
    }

    #[test]
    fn a_route_in_the_table_only_is_drift() {
        let text = template();
        assert_eq!(generate(&text).unwrap(), text, "template.yaml is what `cargo xtask gen` writes");
        // The table has the grab route, the template lost it (as when a row is added to the table
        // and the template is not written again): `gen --check` sees the difference.
        let start = text.find("  GrabRoute:\n").expect("the grab route");
        let target = "Target: !Sub integrations/${GrabIntegration}\n";
        let end = start + text[start..].find(target).unwrap() + target.len();
        let lost = format!("{}{}", &text[..start], &text[end..]);
        assert_ne!(lost, text);
        assert_eq!(generate(&lost).unwrap(), text, "the route is written back");
    }
}
