//! The functions' rights: template.yaml's policies, as IAM reads them, against the grants they are
//! written from (`shared::rights`), and against calls no function may make.
//!
//! The local cloud (scripts/local-cloud, MiniStack with AUTH=true) evaluates actions, resources
//! and the queue's policy on every route and path, under each function's own role, and refuses a
//! right taken away; it does not resolve `dynamodb:LeadingKeys` (MiniStack 1.5.33's
//! `dynamodb_service_context` sets `dynamodb:Attributes` and `dynamodb:Select` only, and an absent
//! key satisfies `ForAllValues`), so the keys each write is scoped to are proved here, by
//! evaluating the documents. The rights are `shared/src/rights.rs` (each grant says which calls of
//! which file need it); the template's policies are written from it by `cargo xtask gen`, so these
//! tests hold what the generator wrote, as IAM reads it, to what the source means.

use std::collections::BTreeSet;

use serde_json::Value;

use shared::rights::{GRANTS, When};

use crate::template::template;

/// One right of one function: actions on a resource, for items whose partition key starts with
/// one of `keys` (`None`: any item).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Right {
    function: String,
    action: String,
    on: String,
    keys: Option<Vec<String>>,
}

/// Every call the code makes: (function, action, resource, the item's key prefix where the
/// action names an item), from each function's grants (`shared::rights`, the source the
/// template's policies are written from). Resources by their template name; `Table/index/GSI2`
/// for a query of an index.
fn calls() -> Vec<(&'static str, &'static str, &'static str, Option<&'static str>)> {
    let mut calls = Vec::new();
    for g in GRANTS.iter().filter(|g| g.when != When::Emulator) {
        for action in g.actions {
            for on in g.on {
                if g.keys.is_empty() {
                    calls.push((g.function, *action, on.name, None));
                }
                for key in g.keys {
                    calls.push((g.function, *action, on.name, Some(*key)));
                }
            }
        }
    }
    calls
}

/// Calls no function may make: a write outside the items it owns, a key it must not read, a
/// send only the sealers make, a change to the warm fleet.
const REFUSED: &[(&str, &str, &str, Option<&str>)] = &[
    ("door", "dynamodb:UpdateItem", "Table", Some("EVENT#")),
    ("door", "dynamodb:UpdateItem", "Table", Some("TICKET#")),
    ("door", "dynamodb:PutItem", "Table", Some("ORDER#")),
    ("door", "dynamodb:DeleteItem", "Table", Some("TICKET#")),
    ("mail", "dynamodb:PutItem", "Table", Some("EVENT#")),
    ("mail", "dynamodb:PutItem", "Table", Some("RETURN#")),
    ("mail", "dynamodb:UpdateItem", "Table", Some("EVENT#")),
    ("mail", "dynamodb:ConditionCheckItem", "Table", Some("EVENT#")),
    ("mail", "sqs:SendMessage", "OrdersQueue", None),
    ("grab", "dynamodb:PutItem", "Table", Some("EVENT#")),
    ("grab", "dynamodb:PutItem", "Table", Some("ROLL#")),
    ("query", "dynamodb:PutItem", "Table", Some("ROLL#")),
    ("grab", "dynamodb:PutItem", "Table", Some("ORDER#")),
    ("grab", "dynamodb:PutItem", "Table", Some("TICKET#")),
    ("grab", "dynamodb:UpdateItem", "Table", Some("TICKET#")),
    ("grab", "dynamodb:DeleteItem", "Table", Some("ORDER#")),
    ("grab", "dynamodb:DeleteItem", "Table", Some("EVENT#")),
    ("grab", "secretsmanager:GetSecretValue", "PassKeySecret", None),
    ("release", "dynamodb:PutItem", "Table", Some("ORDER#")),
    ("release", "dynamodb:PutItem", "Table", Some("TICKET#")),
    ("release", "dynamodb:UpdateItem", "Table", Some("ORDER#")),
    ("release", "secretsmanager:GetSecretValue", "PassKeySecret", None),
    ("reconcile", "dynamodb:PutItem", "Table", Some("ORDER#")),
    ("reconcile", "dynamodb:PutItem", "Table", Some("EVENT#")),
    ("reconcile", "dynamodb:UpdateItem", "Table", Some("ORDER#")),
    ("query", "dynamodb:PutItem", "Table", Some("EVENT#")),
    ("query", "dynamodb:UpdateItem", "Table", Some("ORDER#")),
    ("query", "sqs:SendMessage", "OrdersQueue", None),
    ("query", "secretsmanager:GetSecretValue", "OrderKeySecret", None),
    ("query", "secretsmanager:GetSecretValue", "PassKeySecret", None),
    ("verify-hash", "dynamodb:PutItem", "Table", Some("EVENT#")),
    ("verify-hash", "secretsmanager:GetSecretValue", "OrderKeySecret", None),
    ("release", "lambda:PutProvisionedConcurrencyConfig", "GrabFunction:live", None),
    ("pages", "dynamodb:GetItem", "Table", Some("EVENT#")),
];

/// A resource as the template writes it, by name: `!GetAtt X.Arn` and `!Ref X` are `X`,
/// `!Sub "${X.Arn}/rest"` is `X/rest`, the account's SES identities `identities`.
fn resource_name(v: &Value) -> String {
    // The AWS form where an emulator gets another (`HasAwsEndpointUrl`: the SES identity).
    if let Some(branches) = v["Fn::If"].as_array() {
        // A stack re-attached to retained pass keys names them by parameter; the right is the same.
        if branches[0] == "CreatesPassKeys" {
            return resource_name(&branches[1]);
        }
        assert_eq!(branches[0], "HasAwsEndpointUrl", "a conditional resource: {v}");
        return resource_name(&branches[2]);
    }
    if let Some(s) = v.as_str() {
        return s.to_owned();
    }
    if let Some(att) = v["Fn::GetAtt"].as_array() {
        return att[0].as_str().unwrap().to_owned();
    }
    if let Some(name) = v["Ref"].as_str() {
        return name.to_owned();
    }
    if let Some(sub) = v["Fn::Sub"].as_str() {
        // Any of the account's identities (SES asks a sandboxed account's recipients' too), the
        // statement's condition naming the From address: see `granted`.
        if sub.contains(":ses:") && sub.ends_with(":identity/*") {
            return "identities".into();
        }
        return sub.replace(".Arn}", "}").replace("${", "").replace('}', "");
    }
    panic!("a resource the test cannot name: {v}")
}

fn list(v: &Value) -> Vec<&Value> {
    match v {
        Value::Array(items) => items.iter().collect(),
        Value::Null => vec![],
        one => vec![one],
    }
}

/// Every function's rights as the template grants them (a statement under `!If` counts: the
/// condition only leaves out what a deployment has not, the cache's secret without TLS).
fn granted() -> BTreeSet<Right> {
    let t = template();
    let mut rights = BTreeSet::new();
    for (_, f) in t["Resources"].as_object().unwrap().iter().filter(|(_, r)| r["Type"] == "AWS::Serverless::Function") {
        let function = f["Metadata"]["BuildProperties"]["Binary"].as_str().unwrap().to_owned();
        for policy in list(&f["Properties"]["Policies"]) {
            if let Some(poller) = policy.get("SQSPollerPolicy") {
                let on = resource_name(&poller["QueueName"]);
                let named = shared::rights::POLLERS.iter().any(|(f, q)| *f == function && *q == on);
                assert!(named, "{function}: a poller on {on} that shared::rights::POLLERS lacks");
                rights.insert(Right { function: function.clone(), action: "SQSPollerPolicy".into(), on, keys: None });
                continue;
            }
            // Nothing beside the statements and the pollers: no SAM policy template or managed
            // policy (each would grant what no grant names).
            assert!(
                policy.as_object().is_some_and(|p| p.len() == 1 && p.contains_key("Statement")),
                "{function}: a policy that is neither a statement list nor a poller: {policy}"
            );
            for statement in list(&policy["Statement"]) {
                let statement = match statement.get("Fn::If") {
                    // An emulator's own statement: no AWS deployment has it.
                    Some(branches) if branches[0] == "HasAwsEndpointUrl" => continue,
                    Some(branches) if branches[2]["Ref"] == "AWS::NoValue" => &branches[1],
                    Some(other) => panic!("{function}: a conditional statement the test cannot read: {other}"),
                    None => statement,
                };
                assert_eq!(statement["Effect"], "Allow", "{function}: identity policies only allow");
                // The AWS form of a condition an emulator is not given (`HasAwsEndpointUrl`).
                let condition = match statement["Condition"].get("Fn::If") {
                    Some(branches) if branches[0] == "HasAwsEndpointUrl" => &branches[2],
                    _ => &statement["Condition"],
                };
                // Sending mail: only as the sender (`ses:FromAddress`), whatever identity SES asks.
                if let Some(from) = condition.get("StringEquals").and_then(|c| c.get("ses:FromAddress")) {
                    assert_eq!(from, &serde_json::json!({"Ref": "SenderEmail"}), "{function}: mail only as the sender");
                    for action in list(&statement["Action"]) {
                        for on in list(&statement["Resource"]) {
                            rights.insert(Right {
                                function: function.clone(),
                                action: action.as_str().unwrap().to_owned(),
                                on: format!("{} as SenderEmail", resource_name(on)),
                                keys: None,
                            });
                        }
                    }
                    continue;
                }
                let keys = condition.as_object().map(|c| {
                    // An update's attributes (`updates_may_name_only_the_attributes_the_code_names`)
                    // narrow a right scoped by key; they never stand alone.
                    let scopes: Vec<_> = c.keys().filter(|k| *k != "ForAllValues:StringEquals").collect();
                    assert_eq!(scopes, ["ForAllValues:StringLike"], "{function}: {c:?}");
                    if let Some(attributes) = c.get("ForAllValues:StringEquals") {
                        let names: Vec<_> = attributes.as_object().unwrap().keys().collect();
                        assert_eq!(names, ["dynamodb:Attributes"], "{function}: {c:?}");
                    }
                    list(&c["ForAllValues:StringLike"]["dynamodb:LeadingKeys"])
                        .into_iter()
                        .map(|k| k.as_str().unwrap().strip_suffix('*').expect("a key prefix ends with *").to_owned())
                        .collect::<Vec<_>>()
                });
                for action in list(&statement["Action"]) {
                    for on in list(&statement["Resource"]) {
                        rights.insert(Right {
                            function: function.clone(),
                            action: action.as_str().unwrap().to_owned(),
                            on: resource_name(on),
                            keys: keys.clone(),
                        });
                    }
                }
            }
        }
    }
    rights
}

fn allows(rights: &BTreeSet<Right>, (function, action, on, key): (&str, &str, &str, Option<&str>)) -> bool {
    rights.iter().any(|r| {
        r.function == function
            && r.action == action
            && r.on == on
            && match (&r.keys, key) {
                (None, _) => true,
                (Some(prefixes), Some(key)) => prefixes.iter().any(|p| p == key),
                (Some(_), None) => false,
            }
    })
}

#[test]
fn every_call_the_code_makes_is_granted_and_every_right_is_used() {
    let rights = granted();
    let missing: Vec<_> = calls().into_iter().filter(|c| !allows(&rights, *c)).collect();
    assert!(missing.is_empty(), "calls the template does not grant: {missing:#?}");
    // Each right (and each key it is scoped to) serves a call; the event source mapping's poller
    // is mail's by SAM's own policy.
    let unused: Vec<String> = rights
        .iter()
        .filter(|r| r.action != "SQSPollerPolicy")
        .flat_map(|r| match &r.keys {
            None => vec![(r, None)],
            Some(prefixes) => prefixes.iter().map(|p| (r, Some(p.as_str()))).collect(),
        })
        .filter(|(r, key)| {
            !calls()
                .iter()
                .any(|(f, a, on, k)| *f == r.function && *a == r.action && *on == r.on && (key.is_none() || *k == *key))
        })
        .map(|(r, key)| format!("{} {} on {} {}", r.function, r.action, r.on, key.unwrap_or("")))
        .collect();
    assert!(unused.is_empty(), "rights no call uses: {unused:#?}");
}

/// grab's and the door's updates name only the attributes the code's updates name
/// (`shared::store::schema::updated`, which the store's unit tests hold the expressions to); every
/// update right of theirs is narrowed so, one item kind to a statement.
#[test]
fn updates_may_name_only_the_attributes_the_code_names() {
    use shared::store::schema::updated;
    let t = template();
    let mut found = BTreeSet::new();
    for (binary, resource) in [("grab", "GrabFunction"), ("door", "DoorFunction")] {
        for policy in list(&t["Resources"][resource]["Properties"]["Policies"]) {
            for statement in list(&policy["Statement"]).into_iter().filter(|s| s["Action"] == "dynamodb:UpdateItem") {
                let condition = &statement["Condition"];
                let keys = list(&condition["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]);
                assert_eq!(keys.len(), 1, "{binary}: one item kind to an update statement: {condition}");
                let attributes: BTreeSet<&str> = list(&condition["ForAllValues:StringEquals"]["dynamodb:Attributes"])
                    .into_iter()
                    .map(|a| a.as_str().unwrap())
                    .collect();
                let code: &[&str] = match (binary, keys[0].as_str().unwrap()) {
                    ("grab", "ORDER#*") => updated::GRAB_ORDER,
                    ("grab", "EVENT#*") => updated::GRAB_EVENT,
                    ("door", "ORDER#*") => updated::DOOR_ORDER,
                    other => panic!("an update the code does not make: {other:?}"),
                };
                assert_eq!(attributes, code.iter().copied().collect(), "{binary} {keys:?}");
                found.insert((binary, keys[0].as_str().unwrap().to_owned()));
            }
        }
    }
    assert_eq!(found.len(), 3, "grab's order and event updates and the door's: {found:?}");
}

#[test]
fn calls_outside_a_functions_items_are_refused() {
    let rights = granted();
    let allowed: Vec<_> = REFUSED.iter().filter(|c| allows(&rights, **c)).collect();
    assert!(allowed.is_empty(), "calls the template lets through: {allowed:#?}");
}

/// Only the functions that seal orders may send to the orders queue: its policy denies every
/// other principal, so a send the code makes from another function fails in AWS.
#[test]
fn the_queue_policy_lets_exactly_the_senders_send() {
    let t = template();
    let statements = &t["Resources"]["OrdersQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"];
    let deny = list(statements).into_iter().find(|s| s["Effect"] == "Deny").expect("a deny");
    assert_eq!(deny["Action"], "sqs:SendMessage");
    // Each role named twice: its ARN, and its sessions' (how MiniStack names the caller).
    let names = list(&deny["Condition"]["ArnNotLike"]["aws:PrincipalArn"]);
    let exempt: BTreeSet<String> = names
        .iter()
        .filter_map(|r| r["Fn::GetAtt"][0].as_str())
        .map(|role| role.trim_end_matches("Role").to_owned())
        .collect();
    let sessions: BTreeSet<String> = names
        .iter()
        .filter_map(|r| r["Fn::Sub"].as_str())
        .map(|s| {
            let role =
                s.split("assumed-role/${").nth(1).and_then(|r| r.strip_suffix("}/*")).expect("a session pattern");
            role.trim_end_matches("Role").to_owned()
        })
        .collect();
    assert_eq!(exempt, sessions, "each sender's role by its ARN and by its sessions'");
    let functions = t["Resources"].as_object().unwrap();
    let senders: BTreeSet<String> = calls()
        .into_iter()
        .filter(|(_, a, on, _)| *a == "sqs:SendMessage" && *on == "OrdersQueue")
        .map(|(f, ..)| {
            functions
                .iter()
                .find(|(_, r)| r["Metadata"]["BuildProperties"]["Binary"] == *f)
                .map(|(name, _)| name.clone())
                .unwrap()
        })
        .collect();
    assert_eq!(exempt, senders, "the queue policy's senders are the functions that send");
}
