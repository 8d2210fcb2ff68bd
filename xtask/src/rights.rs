//! template.yaml's policies and docs/SECURITY.md's table of rights, from each function's grants
//! (shared/src/rights.rs).

use shared::rights::{GRANTS, Grant, POLLERS, When};

use crate::region;

/// The width a policy's comment is wrapped to.
const WIDTH: usize = 100;

fn comment(text: &str, indent: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && indent + 2 + line.len() + 1 + word.len() > WIDTH {
            out += &format!("{}# {line}\n", " ".repeat(indent));
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out += &format!("{}# {line}\n", " ".repeat(indent));
    }
    out
}

/// `key: value` where value is a YAML expression: a flow value on the line, or a tag whose
/// block lines follow, indented under the key.
fn field(key: &str, yaml: &str, indent: usize) -> String {
    let pad = " ".repeat(indent);
    let mut lines = yaml.lines();
    let mut out = format!("{pad}{key}: {}\n", lines.next().unwrap_or_default());
    for l in lines {
        out += &format!("{pad}{l}\n");
    }
    out
}

/// A list of flow values: on the line when it fits, else one per line.
fn list(key: &str, items: &[&str], indent: usize) -> String {
    let pad = " ".repeat(indent);
    match items {
        [one] => field(key, one, indent),
        _ => {
            let flow = format!("{pad}{key}: [{}]", items.join(", "));
            if flow.len() <= WIDTH + 10 && items.iter().all(|i| !i.contains('\n')) {
                flow + "\n"
            } else {
                let mut out = format!("{pad}{key}:\n");
                for i in items {
                    out += &format!("{pad}  - {i}\n");
                }
                out
            }
        }
    }
}

fn quoted_keys(keys: &[&str]) -> String {
    keys.iter().map(|k| format!("\"{k}*\"")).collect::<Vec<_>>().join(", ")
}

/// One statement, its keys at `indent`.
fn statement(g: &Grant, indent: usize) -> String {
    let mut out = String::new();
    out += &list("Action", g.actions, indent);
    let on: Vec<&str> = g.on.iter().map(|r| r.yaml).collect();
    out += &list("Resource", &on, indent);
    let pad = " ".repeat(indent);
    match (g.keys, g.attributes, g.condition) {
        ([], None, None) => {}
        ([], None, Some(raw)) => out += &field("Condition", raw, indent),
        (keys, None, None) => {
            out += &format!(
                "{pad}Condition: {{\"ForAllValues:StringLike\": {{\"dynamodb:LeadingKeys\": [{}]}}}}\n",
                quoted_keys(keys)
            )
        }
        (keys, Some(attributes), None) => {
            out += &format!("{pad}Condition:\n");
            out += &format!("{pad}  ForAllValues:StringLike: {{\"dynamodb:LeadingKeys\": [{}]}}\n", quoted_keys(keys));
            out += &format!(
                "{pad}  ForAllValues:StringEquals: {{\"dynamodb:Attributes\": [{}]}}\n",
                attributes.join(", ")
            );
        }
        _ => panic!("{}: a grant with attributes and a condition of its own: {:?}", g.function, g.actions),
    }
    out
}

fn policies(function: &str) -> String {
    let mut out = String::from("        - Statement:\n");
    for g in GRANTS.iter().filter(|g| g.function == function) {
        out += &comment(g.why, 12);
        let body = match g.when.condition() {
            None => format!("            - Effect: Allow\n{}", statement(g, 14)),
            Some(condition) => format!(
                "            - !If\n              - {condition}\n              - Effect: Allow\n{}              - !Ref AWS::NoValue\n",
                statement(g, 16)
            ),
        };
        out += &body;
    }
    for (_, queue) in POLLERS.iter().filter(|(f, _)| *f == function) {
        out += &comment(
            "Receive and delete for the event source mapping, on this queue alone (shared/src/rights.rs, POLLERS).",
            8,
        );
        out += &format!("        - SQSPollerPolicy:\n            QueueName: !GetAtt {queue}.QueueName\n");
    }
    out
}

/// The functions that hold rights, in the order their first grant is written.
fn functions() -> Vec<&'static str> {
    let mut seen = Vec::new();
    for g in GRANTS {
        if !seen.contains(&g.function) {
            seen.push(g.function);
        }
    }
    seen
}

pub fn template(text: &str) -> Result<String, String> {
    let mut text = text.to_owned();
    for f in functions() {
        text = region::replace(&text, &format!("policies of {f}"), &policies(f))?;
    }
    Ok(text)
}

pub fn security(text: &str) -> Result<String, String> {
    let ticked = |items: &[&str]| items.iter().map(|i| format!("`{i}`")).collect::<Vec<_>>().join(", ");
    let mut body = String::from("| function | actions | on | keys |\n|---|---|---|---|\n");
    for f in functions() {
        for g in GRANTS.iter().filter(|g| g.function == f && g.when != When::Emulator) {
            let on: Vec<&str> = g.on.iter().map(|r| r.name).collect();
            let keys = if g.keys.is_empty() { "any".to_owned() } else { ticked(g.keys) };
            body += &format!("| {f} | {} | {} | {keys} |\n", ticked(g.actions), ticked(&on));
        }
        for (_, queue) in POLLERS.iter().filter(|(p, _)| *p == f) {
            body += &format!("| {f} | `SQSPollerPolicy` | `{queue}` | any |\n");
        }
    }
    region::replace(text, "rights", &body)
}
