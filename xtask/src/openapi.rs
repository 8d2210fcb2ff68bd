//! openapi.yaml's copies of the codes: a problem's `code` (shared/src/http/problem.rs, `Code`) and
//! a release warning's (shared/domain/src/warm_fleet.rs, `WarningCode`).

use shared::{domain::warm_fleet::WarningCode, http::problem::Code};

use crate::region;

pub fn generate(text: &str) -> Result<String, String> {
    let list = |codes: Vec<&str>| -> String { codes.iter().map(|c| format!("            - {c}\n")).collect() };
    let text = region::replace(text, "problem codes", &list(Code::ALL.iter().map(|c| c.as_str()).collect()))?;
    region::replace(&text, "warning codes", &list(WarningCode::ALL.iter().map(|c| c.as_str()).collect()))
}
