//! The docs' tables that copy a source: DEPLOY's parameters (template.yaml's `Parameters`, their
//! defaults and descriptions) and DESIGN's per-user limits (the route table's).

use serde_yaml_ng::Value;
use shared::{
    config::GrabPolicy,
    http::routes::{Limit, ROUTES, Throttle},
};

use crate::region;

/// A table cell: one line, no pipe.
fn cell(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|")
}

/// samconfig.toml's production environment: the values it overrides, by parameter.
fn production(samconfig: &str) -> Vec<(String, String)> {
    let Some(section) = samconfig.split("[production.deploy.parameters]").nth(1) else { return Vec::new() };
    let Some(line) = section.lines().find(|l| l.starts_with("parameter_overrides")) else { return Vec::new() };
    let overrides = line.split_once('=').map_or("", |(_, v)| v).trim().trim_matches('"');
    overrides
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

pub fn deploy(text: &str, template: &str, samconfig: &str) -> Result<String, String> {
    let template: Value = serde_yaml_ng::from_str(template).map_err(|e| format!("template.yaml: {e}"))?;
    let parameters = template.get("Parameters").and_then(Value::as_mapping).ok_or("template.yaml has no Parameters")?;
    let production = production(samconfig);
    let mut body = String::from("| parameter | default | production | meaning |\n|---|---|---|---|\n");
    for (name, p) in parameters {
        let name = name.as_str().ok_or("a parameter's name is no string")?;
        let default = match p.get("Default") {
            None => "—".to_owned(),
            Some(Value::String(s)) if s.is_empty() => "empty".to_owned(),
            Some(Value::String(s)) => format!("`{s}`"),
            Some(Value::Number(n)) => format!("`{n}`"),
            Some(Value::Bool(b)) => format!("`{b}`"),
            Some(other) => return Err(format!("{name}: a default of another kind ({other:?})")),
        };
        let produced = production.iter().find(|(k, _)| k == name).map_or(String::new(), |(_, v)| format!("`{v}`"));
        let mut meaning =
            cell(p.get("Description").and_then(Value::as_str).ok_or(format!("{name} has no Description"))?);
        // A route throttle: the routes that spend it, from the route table.
        let spent: Vec<String> =
            ROUTES.iter().filter(|r| r.throttle.parameter() == name).map(|r| format!("`{}`", r.key())).collect();
        if !spent.is_empty() {
            meaning += &format!(" Spent by {}.", spent.join(", "));
        }
        if name == Throttle::Read.parameter() {
            meaning += &format!(" And the pages, `{}`.", pages::ROUTE_KEY);
        }
        body += &format!("| `{name}` | {default} | {produced} | {meaning} |\n");
    }
    region::replace(text, "parameters", &body)
}

pub fn design(text: &str) -> Result<String, String> {
    let mut body = String::from("| variable | read by | default | meaning |\n|---|---|---|---|\n");
    for s in shared::settings::ALL {
        let default =
            (s.default)().map_or("—".to_owned(), |d| if d.is_empty() { "empty".to_owned() } else { format!("`{d}`") });
        body += &format!("| `{}` | {} | {default} | {} |\n", s.name, s.read_by, cell(s.meaning));
    }
    body += "| `RATE_LIMIT_<ROUTE>` | query, verify-hash, grab, door | section 3 | requests per user per window on one route: each route's setting and default are section 3's table, from the route table (`shared/src/http/routes.rs`) |\n";
    let text = region::replace(text, "settings", &body)?;

    let mut body = String::from("| route | setting | default, per window |\n|---|---|---|\n");
    for r in &ROUTES {
        let (setting, default) = match r.limit {
            Limit::PerUser { setting, default, .. } => (format!("`{setting}`"), default.to_string()),
            Limit::GrabScript => (
                "`GRAB_RATE_LIMIT` (refused grabs, in the script)".to_owned(),
                GrabPolicy::DEFAULT_RATE_LIMIT.to_string(),
            ),
            Limit::Staff => ("(staff: the stage's throttle)".to_owned(), "—".to_owned()),
            Limit::Public => ("(public: its throttle)".to_owned(), "—".to_owned()),
        };
        body += &format!("| `{}` | {setting} | {default} |\n", r.key());
    }
    region::replace(&text, "per-user limits", &body)
}
