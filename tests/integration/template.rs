//! `template.yaml` against the code: the deployment and the local runner must provision the same
//! table, the same queues and the same routes. The template is read, never copied: a change on
//! one side without the other fails here.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use shared::{
    http::routes::{Function, ROUTES},
    store::schema::{INDEXES, KEY_ATTRIBUTES, attr},
};

use crate::helpers::repo_root;

/// The template as JSON, with the short intrinsic forms (`!Ref X`) turned into their long ones
/// (`{"Ref": "X"}`), as CloudFormation reads them.
pub(crate) fn template() -> Value {
    let text = std::fs::read_to_string(repo_root().join("template.yaml")).expect("template.yaml");
    let yaml: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).expect("template.yaml is YAML");
    to_json(yaml)
}

fn to_json(v: serde_yaml_ng::Value) -> Value {
    use serde_yaml_ng::Value as Y;
    match v {
        Y::Null => Value::Null,
        Y::Bool(b) => json!(b),
        Y::Number(n) => serde_json::to_value(n).unwrap(),
        Y::String(s) => json!(s),
        Y::Sequence(items) => Value::Array(items.into_iter().map(to_json).collect()),
        Y::Mapping(m) => Value::Object(
            m.into_iter().map(|(k, v)| (k.as_str().expect("string keys").to_owned(), to_json(v))).collect(),
        ),
        Y::Tagged(t) => {
            let tag = t.tag.to_string();
            let name = tag.trim_start_matches('!');
            let inner = to_json(t.value);
            let inner = match (name, inner) {
                ("GetAtt", Value::String(s)) => json!(s.splitn(2, '.').collect::<Vec<_>>()),
                (_, other) => other,
            };
            let key = if name == "Ref" || name == "Condition" { name.to_owned() } else { format!("Fn::{name}") };
            json!({ key: inner })
        }
    }
}

fn resources_of_type<'a>(t: &'a Value, kind: &str) -> Vec<(&'a String, &'a Value)> {
    t["Resources"].as_object().unwrap().iter().filter(|(_, r)| r["Type"] == kind).collect()
}

/// `Fn::Sub` of `${AWS::StackName}-suffix` with the given stack name.
fn with_stack(v: &Value, stack: &str) -> String {
    v["Fn::Sub"].as_str().unwrap_or_else(|| panic!("expected !Sub, got {v}")).replace("${AWS::StackName}", stack)
}

/// The default environment's stack name in samconfig.toml.
fn default_stack_name() -> String {
    let text = std::fs::read_to_string(repo_root().join("samconfig.toml")).expect("samconfig.toml");
    let section = text.split("[default.global.parameters]").nth(1).expect("[default.global.parameters]");
    let line = section.lines().find(|l| l.trim_start().starts_with("stack_name")).expect("stack_name");
    line.split('"').nth(1).unwrap().to_owned()
}

#[test]
fn the_table_has_the_keys_and_indexes_the_code_uses() {
    let t = template();
    let table = &t["Resources"]["Table"]["Properties"];
    let declared: BTreeMap<String, String> = table["AttributeDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["AttributeName"].as_str().unwrap().to_owned(), a["AttributeType"].as_str().unwrap().to_owned()))
        .collect();
    let wanted: BTreeMap<String, String> =
        KEY_ATTRIBUTES.iter().map(|(n, k)| ((*n).to_owned(), (*k).to_owned())).collect();
    assert_eq!(declared, wanted);
    assert_eq!(
        table["KeySchema"],
        json!([{"AttributeName": attr::PK, "KeyType": "HASH"}, {"AttributeName": attr::SK, "KeyType": "RANGE"}])
    );
    let indexes = table["GlobalSecondaryIndexes"].as_array().unwrap();
    assert_eq!(indexes.len(), INDEXES.len());
    for (name, pk, sk) in INDEXES {
        let index = indexes.iter().find(|i| i["IndexName"] == name).unwrap_or_else(|| panic!("index {name}"));
        assert_eq!(
            index["KeySchema"],
            json!([{"AttributeName": pk, "KeyType": "HASH"}, {"AttributeName": sk, "KeyType": "RANGE"}])
        );
        assert_eq!(index["Projection"]["ProjectionType"], "ALL", "the local runner projects everything");
    }
    assert_eq!(table["BillingMode"], "PAY_PER_REQUEST");
    assert_eq!(table["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"], true);
    assert_eq!(table["DeletionProtectionEnabled"], json!({"Ref": "TableDeletionProtection"}));
}

#[test]
fn the_queues_are_named_and_redriven_as_the_runner_provisions_them() {
    let t = template();
    let stack = default_stack_name();
    let settings = local_runner::LocalSettings::from_env().unwrap();
    let queue = &t["Resources"]["OrdersQueue"]["Properties"];
    let dlq = &t["Resources"]["OrdersDeadLetterQueue"]["Properties"];
    assert_eq!(with_stack(&queue["QueueName"], &stack), "ticketgrab-orders");
    assert_eq!(with_stack(&queue["QueueName"], &stack), settings.queue_name, "the runner's default queue");
    assert_eq!(
        with_stack(&dlq["QueueName"], &stack),
        local_runner::provision::dead_letter_queue_name(&settings.queue_name)
    );
    assert_eq!(queue["VisibilityTimeout"], local_runner::provision::VISIBILITY_TIMEOUT_SECONDS);
    assert_eq!(queue["RedrivePolicy"]["maxReceiveCount"], local_runner::provision::MAX_RECEIVE_COUNT);
    assert_eq!(queue["RedrivePolicy"]["deadLetterTargetArn"], json!({"Fn::GetAtt": ["OrdersDeadLetterQueue", "Arn"]}));
    assert_eq!(dlq["MessageRetentionPeriod"], local_runner::provision::DLQ_RETENTION_SECONDS);

    // The DLQ (orders, addresses among them) is this account's alone.
    let dlq_policy = &t["Resources"]["OrdersDeadLetterQueuePolicy"]["Properties"];
    assert_eq!(dlq_policy["Queues"], json!([{"Ref": "OrdersDeadLetterQueue"}]));
    let deny = &dlq_policy["PolicyDocument"]["Statement"][0];
    assert_eq!((&deny["Effect"], &deny["Action"]), (&json!("Deny"), &json!("sqs:*")));
    assert_eq!(deny["Condition"]["StringNotEquals"]["aws:PrincipalAccount"], json!({"Ref": "AWS::AccountId"}));

    // Visibility at least six times the consumer's timeout, so a slow batch is not delivered twice.
    let mail_timeout = t["Resources"]["MailFunction"]["Properties"]["Timeout"].as_u64().unwrap();
    assert!(queue["VisibilityTimeout"].as_u64().unwrap() >= 6 * mail_timeout);
    // The mapping is its own resource: a SAM `SQS` event would add the managed
    // AWSLambdaSQSQueueExecutionRole (receive and delete on every queue) to mail's role.
    assert!(t["Resources"]["MailFunction"]["Properties"]["Events"].is_null(), "no SAM event on mail");
    let orders = &t["Resources"]["MailOrders"];
    assert_eq!(orders["Type"], "AWS::Lambda::EventSourceMapping");
    let orders = &orders["Properties"];
    assert_eq!(orders["FunctionName"], json!({"Ref": "MailFunction"}));
    assert_eq!(orders["EventSourceArn"], json!({"Fn::GetAtt": ["OrdersQueue", "Arn"]}));
    assert_eq!(orders["FunctionResponseTypes"], json!(["ReportBatchItemFailures"]));
    assert_eq!(orders["ScalingConfig"]["MaximumConcurrency"], json!({"Ref": "MailMaximumConcurrency"}));
    assert_eq!(orders["BatchSize"], json!({"Ref": "MailBatchSize"}));
    let batch = &t["Parameters"]["MailBatchSize"];
    assert_eq!(batch["MaxValue"], json!(shared::queue::MAX_BATCH), "SQS's most, mail's whole batch at once");
    assert_eq!(batch["Default"], json!(shared::queue::MAX_BATCH));
}

#[test]
fn every_route_is_declared_with_the_jwt_authorizer_and_reaches_its_function() {
    let t = template();
    let resources = &t["Resources"];
    let mut declared = BTreeMap::new();
    for (name, route) in resources_of_type(&t, "AWS::ApiGatewayV2::Route") {
        let p = &route["Properties"];
        let public = shared::http::routes::by_key(p["RouteKey"].as_str().unwrap()).is_some_and(|r| r.public());
        if p["RouteKey"] == pages::ROUTE_KEY || public {
            // The pages are public files, and the sale's state is for anyone: no authorizer.
            assert_eq!(p["AuthorizationType"], "NONE", "{name}");
        } else {
            assert_eq!(p["AuthorizationType"], "JWT", "{name}");
            assert_eq!(p["AuthorizerId"], json!({"Ref": "JwtAuthorizer"}), "{name}");
        }
        let integration =
            p["Target"]["Fn::Sub"].as_str().unwrap().trim_start_matches("integrations/${").trim_end_matches('}');
        let integration = &resources[integration]["Properties"];
        assert_eq!(integration["IntegrationType"], "AWS_PROXY");
        assert_eq!(integration["PayloadFormatVersion"], "2.0", "the handlers read payload 2.0");
        let function = integrated_function(&integration["IntegrationUri"]);
        let binary = resources[function]["Metadata"]["BuildProperties"]["Binary"].as_str().unwrap();
        declared.insert(p["RouteKey"].as_str().unwrap().to_owned(), binary.to_owned());
    }
    let mut wanted: BTreeMap<String, String> = ROUTES.iter().map(|r| (r.key(), r.function.name().to_owned())).collect();
    wanted.insert(pages::ROUTE_KEY.to_owned(), "pages".to_owned());
    assert_eq!(declared, wanted);
    // Each route has its own throttle, so a flood of one route cannot spend another's budget.
    let stage = &resources["HttpApiStage"];
    let throttled: BTreeSet<String> =
        stage["Properties"]["RouteSettings"].as_object().expect("route settings").keys().cloned().collect();
    assert_eq!(throttled, wanted.keys().cloned().collect::<BTreeSet<_>>(), "a throttle per route");
    let before: BTreeSet<String> = stage["DependsOn"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| resources[r.as_str().unwrap()]["Properties"]["RouteKey"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(before, throttled, "the stage is made after the routes its settings name");

    let authorizer = &resources["JwtAuthorizer"]["Properties"];
    assert_eq!(authorizer["AuthorizerType"], "JWT");
    assert_eq!(authorizer["JwtConfiguration"]["Audience"], json!([{"Ref": "UserPoolClient"}]));
    assert_eq!(resources["AdminGroup"]["Properties"]["GroupName"], "admin", "the group the handlers look for");
    // Every function behind the API may be invoked by it.
    let invokable: BTreeSet<&str> = resources_of_type(&t, "AWS::Lambda::Permission")
        .iter()
        .map(|(_, p)| p["Properties"]["FunctionName"]["Ref"].as_str().unwrap())
        .collect();
    for (_, i) in resources_of_type(&t, "AWS::ApiGatewayV2::Integration") {
        let uri = &i["Properties"]["IntegrationUri"];
        let target = uri["Ref"].as_str().unwrap_or_else(|| integrated_function(uri));
        assert!(invokable.contains(target), "the API may invoke {target}");
    }
}

/// The function an integration invokes: `!GetAtt F.Arn`, or `!Ref F.Alias` (SAM's alias).
fn integrated_function(uri: &Value) -> &str {
    match uri["Ref"].as_str() {
        Some(alias) => alias.strip_suffix(".Alias").unwrap_or_else(|| panic!("{alias} is not an alias")),
        None => uri["Fn::GetAtt"][0].as_str().unwrap(),
    }
}

/// The warm fleet (docs/DESIGN.md section 12): the API invokes grab and verify-hash through the
/// alias the fleet is provisioned on; reconcile may change provisioned concurrency on those two
/// aliases and nowhere else, and is told their names; release may only read the account's limits.
#[test]
fn the_warm_fleet_lives_on_the_alias_the_api_invokes_and_only_reconcile_changes_it() {
    let t = template();
    let resources = &t["Resources"];
    for (function, integration) in
        [("GrabFunction", "GrabIntegration"), ("VerifyHashFunction", "VerifyHashIntegration")]
    {
        assert_eq!(resources[function]["Properties"]["AutoPublishAlias"], shared::fleet::ALIAS, "{function}");
        assert_eq!(resources[integration]["Properties"]["IntegrationUri"], json!({"Ref": format!("{function}.Alias")}));
    }
    let reconcile = &resources["ReconcileFunction"]["Properties"];
    let env = &reconcile["Environment"]["Variables"];
    assert_eq!(env["GRAB_FUNCTION_NAME"], json!({"Ref": "GrabFunction"}));
    assert_eq!(env["VERIFY_HASH_FUNCTION_NAME"], json!({"Ref": "VerifyHashFunction"}));
    assert_eq!(env["FLEET_ALIAS"], shared::fleet::ALIAS);
    for (name, f) in resources.as_object().unwrap().iter().filter(|(_, r)| r["Type"] == "AWS::Serverless::Function") {
        let statements: Vec<&Value> = f["Properties"]["Policies"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["Statement"].as_array())
            .flatten()
            .collect();
        for statement in statements {
            let actions = statement["Action"].to_string();
            if actions.contains("ProvisionedConcurrency") {
                assert_eq!(name, "ReconcileFunction", "only reconcile keeps the fleet");
                assert_eq!(
                    statement["Resource"],
                    json!([{"Fn::Sub": "${GrabFunction.Arn}:live"}, {"Fn::Sub": "${VerifyHashFunction.Arn}:live"}])
                );
            }
            if actions.contains("lambda:") && !actions.contains("ProvisionedConcurrency") {
                assert_eq!(name, "ReleaseFunction", "{name}: {actions}");
                assert_eq!(statement["Action"], json!(["lambda:GetAccountSettings", "ses:GetAccount"]));
            }
        }
    }
}

#[test]
fn every_function_is_a_workspace_binary_built_by_cargo_lambda() {
    let t = template();
    // The members are the directories (beside them, the build script they share).
    let members: BTreeSet<String> = std::fs::read_dir(repo_root().join("functions"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let mut built = BTreeSet::new();
    for (name, f) in resources_of_type(&t, "AWS::Serverless::Function") {
        assert_eq!(f["Metadata"]["BuildMethod"], "rust-cargolambda", "{name}");
        built.insert(f["Metadata"]["BuildProperties"]["Binary"].as_str().unwrap().to_owned());
    }
    assert_eq!(built, members, "one function per functions/ member, and no other");
    let globals = &t["Globals"]["Function"];
    assert_eq!(globals["Runtime"], "provided.al2023");
    assert_eq!(globals["Handler"], "bootstrap");
    assert_eq!(globals["Architectures"], json!([{"Ref": "Architecture"}]));
    assert_eq!(t["Parameters"]["Architecture"]["Default"], "arm64");
}

#[test]
fn env_json_sets_only_variables_the_template_declares() {
    let t = template();
    let env: Value =
        serde_json::from_str(&std::fs::read_to_string(repo_root().join("env.json")).expect("env.json")).unwrap();
    let global: BTreeSet<&String> =
        t["Globals"]["Function"]["Environment"]["Variables"].as_object().unwrap().keys().collect();
    for (function, vars) in env.as_object().unwrap() {
        let own: BTreeSet<&String> = if function == "Parameters" {
            BTreeSet::new()
        } else {
            let f = &t["Resources"][function];
            assert_eq!(
                f["Type"], "AWS::Serverless::Function",
                "env.json names {function}, not a function of the template"
            );
            f["Properties"]["Environment"]["Variables"].as_object().map(|m| m.keys().collect()).unwrap_or_default()
        };
        for var in vars.as_object().unwrap().keys() {
            assert!(
                global.contains(var) || own.contains(var),
                "env.json sets {var} for {function}, which the template does not declare"
            );
        }
    }
}

/// Every secret env.json names (`*_ARN`, what `sam local invoke` reads) is one provisioning creates
/// in the emulator, and it holds the development value the runner and the tests use: a function
/// in a container and the runner accept each other's hashes, seals and passes.
#[tokio::test]
async fn provisioning_creates_the_secrets_env_json_names_with_the_development_values() {
    let env: Value =
        serde_json::from_str(&std::fs::read_to_string(repo_root().join("env.json")).expect("env.json")).unwrap();
    let named: BTreeSet<String> = env
        .as_object()
        .unwrap()
        .values()
        .flat_map(|vars| vars.as_object().unwrap().iter())
        .filter(|(var, _)| var.ends_with("_ARN"))
        .map(|(_, name)| name.as_str().unwrap().to_owned())
        .collect();
    let secrets = local_runner::settings::development_secrets();
    let provisioned: BTreeSet<String> = secrets.iter().map(|(name, _)| (*name).to_owned()).collect();
    assert_eq!(named, provisioned);

    let settings = local_runner::LocalSettings::from_env().unwrap();
    let sdk = settings.sdk_config().await;
    let client = aws_sdk_secretsmanager::Client::new(&sdk);
    local_runner::provision::ensure_secrets(&client, &secrets).await.unwrap();
    local_runner::provision::ensure_secrets(&client, &secrets).await.expect("again: what exists is kept");
    for (name, value) in &secrets {
        assert_eq!(&shared::secrets::read(&sdk, name).await.unwrap(), value, "{name}");
    }
    // The values are the runner's own: a seal made with the secret checks with the runner's key.
    let sealed = shared::domain::order_seal::SealKey::new(secrets[1].1.as_bytes()).unwrap().seal("{}");
    assert!(settings.seal.check("{}", Some(&sealed)).is_ok());
}

/// openapi.yaml (the contract clients and `scripts/attack` read) and the router serve the same
/// routes, and every code a handler can answer is one the contract names.
#[test]
fn the_openapi_contract_and_the_router_list_the_same_routes_and_codes() {
    let text = std::fs::read_to_string(repo_root().join("openapi.yaml")).expect("openapi.yaml");
    let spec: Value = serde_yaml_ng::from_str(&text).expect("openapi.yaml is YAML");
    assert_eq!(spec["openapi"], "3.1.0");
    let mut documented = BTreeSet::new();
    for (path, item) in spec["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            documented.insert(format!("{} {path}", method.to_ascii_uppercase()));
        }
    }
    let served: BTreeSet<String> = ROUTES.iter().map(|r| r.key()).collect();
    assert_eq!(documented, served);
    assert_eq!(spec["security"], json!([{"cognito": []}]), "every route needs the JWT");

    // Written from `Code` by `cargo xtask gen`; held here too, so a hand edit of the enum fails.
    let codes: BTreeSet<&str> = spec["components"]["schemas"]["Problem"]["properties"]["code"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let answered: BTreeSet<&str> = shared::http::problem::Code::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(answered, codes, "the contract names exactly the codes the handlers answer");

    // Every route with a per-user limit says so.
    for route in ROUTES.iter().filter(|r| matches!(r.limit, shared::http::routes::Limit::PerUser { .. })) {
        let op = &spec["paths"][route.path][route.method.to_ascii_lowercase()];
        assert_eq!(op["responses"]["429"]["$ref"], "#/components/responses/RateLimited", "{}", route.key());
    }
}

/// The value a nest of `Fn::If` takes when exactly the conditions in `true_` hold.
fn pick<'a>(v: &'a Value, true_: &[&str]) -> &'a Value {
    match v.get("Fn::If") {
        Some(branches) => {
            let holds = true_.contains(&branches[0].as_str().unwrap());
            pick(&branches[if holds { 1 } else { 2 }], true_)
        }
        None => v,
    }
}

/// Cluster mode is one parameter: the functions get the configuration endpoint (which the
/// cluster client finds the shards from) and `REDIS_CLUSTER=true`, the replication group its
/// shards; with it disabled the functions get the primary endpoint, as before.
#[test]
fn cluster_mode_gives_the_functions_the_configuration_endpoint() {
    let t = template();
    assert_eq!(t["Parameters"]["CacheClusterMode"]["Default"], "disabled");
    assert_eq!(t["Conditions"]["CacheClustered"], json!({"Fn::Equals": [{"Ref": "CacheClusterMode"}, "enabled"]}));
    let vars = &t["Globals"]["Function"]["Environment"]["Variables"];
    let cases = [
        (
            &["CacheClustered", "CacheTls", "CacheTlsClustered"][..],
            "rediss://${Cache.ConfigurationEndPoint.Address}",
            "true",
        ),
        (&["CacheClustered", "CachePlainClustered"][..], "redis://${Cache.ConfigurationEndPoint.Address}", "true"),
        (&["CacheTls"][..], "rediss://${Cache.PrimaryEndPoint.Address}", "false"),
        (&[][..], "redis://${Cache.PrimaryEndPoint.Address}", "false"),
    ];
    for (holding, url, cluster) in cases {
        let sub = pick(&vars["REDIS_URL"], holding)["Fn::Sub"].as_str().unwrap();
        assert!(sub.starts_with(url), "{holding:?}: {sub}");
        assert_eq!(pick(&vars["REDIS_CLUSTER"], holding), cluster, "{holding:?}");
    }
    assert_eq!(
        t["Conditions"]["CacheTlsClustered"],
        json!({"Fn::And": [{"Condition": "CacheTls"}, {"Condition": "CacheClustered"}]})
    );
    assert_eq!(
        t["Conditions"]["CachePlainClustered"],
        json!({"Fn::And": [{"Fn::Not": [{"Condition": "CacheTls"}]}, {"Condition": "CacheClustered"}]})
    );
    let cache = &t["Resources"]["Cache"]["Properties"];
    assert_eq!(*pick(&cache["NumNodeGroups"], &["CacheClustered"]), json!({"Ref": "CacheShards"}));
    assert_eq!(*pick(&cache["NumCacheClusters"], &[]), json!({"Ref": "CacheNodes"}));
    // Never an evicting policy: the cache's keys carry expiries, which volatile-lru (the default
    // group's) would evict one at a time under memory pressure.
    assert_eq!(cache["CacheParameterGroupName"], json!({"Ref": "CacheParameters"}));
    let parameters = &t["Resources"]["CacheParameters"];
    assert_eq!(parameters["Type"], "AWS::ElastiCache::ParameterGroup");
    assert_eq!(parameters["Properties"]["CacheParameterGroupFamily"], "valkey8", "the engine's family");
    assert_eq!(parameters["Properties"]["Properties"]["maxmemory-policy"], "noeviction");
    assert_eq!(*pick(&parameters["Properties"]["Properties"]["cluster-enabled"], &["CacheClustered"]), json!("yes"));
    assert_eq!(*pick(&parameters["Properties"]["Properties"]["cluster-enabled"], &[]), json!("no"));
    // A cluster-mode group has automatic failover on, whatever its replicas (ElastiCache requires
    // it); Multi-AZ only with a replica to fail over to.
    assert_eq!(cache["AutomaticFailoverEnabled"]["Fn::If"][0], "CacheAutoFailover");
    assert_eq!(
        t["Conditions"]["CacheAutoFailover"],
        json!({"Fn::Or": [{"Condition": "CacheClustered"}, {"Condition": "CacheFailover"}]})
    );
    assert_eq!(cache["MultiAZEnabled"]["Fn::If"][0], "CacheFailover");
}

/// The local runner ends a request at the function's timeout, as Lambda does: the two agree.
#[test]
fn the_runners_function_timeouts_are_the_templates() {
    let t = template();
    let global = t["Globals"]["Function"]["Timeout"].as_u64().expect("a global timeout");
    for function in [Function::Release, Function::Query, Function::VerifyHash, Function::Grab] {
        let own = t["Resources"][function.resource()]["Properties"]["Timeout"].as_u64().unwrap_or(global);
        assert_eq!(function.timeout().as_secs(), own, "{}", function.resource());
    }
    // A reconcile run's lease lasts its function's timeout: a run that died frees it by then.
    let reconcile = t["Resources"]["ReconcileFunction"]["Properties"]["Timeout"].as_u64().unwrap();
    assert_eq!(shared::handlers::reconcile::RUN_LEASE.as_secs(), reconcile);
}

/// Only mail can sign a pass: it alone holds the private key (its variable and its read), and it
/// alone writes the public keys the others read.
#[test]
fn only_mail_holds_the_pass_signing_key() {
    let t = template();
    let functions: Vec<(&String, &Value)> =
        t["Resources"].as_object().unwrap().iter().filter(|(_, r)| r["Type"] == "AWS::Serverless::Function").collect();
    assert_eq!(functions.len(), 8);
    for (name, f) in functions {
        let props = &f["Properties"];
        let env = &props["Environment"]["Variables"];
        let policies = props["Policies"].to_string();
        let private = env.get("PASS_KEY_ARN").is_some() || policies.contains("\"PassKeySecret\"");
        let writes_public = policies.contains("secretsmanager:PutSecretValue");
        assert_eq!(private, name == "MailFunction", "{name} and the private pass key");
        assert_eq!(writes_public, name == "MailFunction", "{name} and the public keys");
        if ["DoorFunction", "QueryFunction"].contains(&name.as_str()) {
            let keys = &env["PASS_PUBLIC_KEYS_ARN"];
            assert_eq!(
                pick(keys, &["CreatesPassKeys"]),
                &json!({"Fn::GetAtt": ["PassPublicKeysSecret", "Id"]}),
                "{name}"
            );
            assert_eq!(pick(keys, &[]), &json!({"Ref": "RetainedPassPublicKeysSecretArn"}), "{name}, re-attached");
        }
    }
    // The door's function cannot release events or touch the cache's keys in DynamoDB beyond one update.
    let door = t["Resources"]["DoorFunction"]["Properties"]["Policies"].to_string();
    assert!(!door.contains("PutItem") && !door.contains("DeleteItem") && !door.contains("sqs:"), "{door}");
}

/// Every function's concurrency is a parameter, none reserved by default and each capped by production's environment, and the
/// alarm topic is encrypted with a key CloudWatch may use.
#[test]
fn every_function_is_capped_and_the_alarm_topic_is_encrypted() {
    let t = template();
    for (name, f) in t["Resources"].as_object().unwrap() {
        if f["Type"] != "AWS::Serverless::Function" {
            continue;
        }
        let reserved = &f["Properties"]["ReservedConcurrentExecutions"];
        let param = format!("{}ReservedConcurrency", name.trim_end_matches("Function"));
        assert_eq!(
            pick(reserved, &[&format!("Reserves{}Concurrency", name.trim_end_matches("Function"))]),
            &json!({"Ref": param}),
            "{name}"
        );
        // 0 by default, so a first deploy fits any account (Lambda keeps 100 unreserved);
        // production's environment caps every function.
        assert_eq!(t["Parameters"][&param]["Default"].as_u64(), Some(0), "{param}: nothing reserved by default");
        assert!(
            production_override(&param).is_some_and(|n| n.parse::<u64>().unwrap() > 0),
            "{param} set for production"
        );
    }
    let topic = &t["Resources"]["AlarmTopic"]["Properties"];
    assert_eq!(topic["KmsMasterKeyId"], json!({"Ref": "AlarmTopicKey"}));
    let statements = &t["Resources"]["AlarmTopicKey"]["Properties"]["KeyPolicy"]["Statement"];
    let cloudwatch = statements
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["Principal"]["Service"] == "cloudwatch.amazonaws.com")
        .expect("CloudWatch may publish");
    assert_eq!(
        cloudwatch["Condition"]["StringEquals"]["aws:SourceAccount"],
        json!({"Ref": "AWS::AccountId"}),
        "for this account's alarms only"
    );
}

/// A parameter as samconfig.toml's production environment sets it.
fn production_override(parameter: &str) -> Option<String> {
    let config = std::fs::read_to_string(repo_root().join("samconfig.toml")).unwrap();
    let section = config.split("[production.deploy.parameters]").nth(1)?.split("\n[").next()?;
    let overrides = section.lines().find(|l| l.starts_with("parameter_overrides"))?;
    let overrides = overrides.split_once('=')?.1.trim().trim_matches('"');
    overrides.split_whitespace().find_map(|kv| kv.strip_prefix(&format!("{parameter}=")).map(str::to_owned))
}

/// The cache requires authentication: with TLS, ElastiCache's AuthToken from a generated secret
/// that every function using the cache may read (and the door, which does not use it, may not);
/// the local cloud passes its stack's token instead.
#[test]
fn the_cache_requires_an_auth_token() {
    let t = template();
    let cache = &t["Resources"]["Cache"]["Properties"];
    assert_eq!(
        pick(&cache["AuthToken"], &["CacheTls"]),
        &json!({"Fn::Sub": "{{resolve:secretsmanager:${CacheAuthSecret}}}"})
    );
    let env = &t["Globals"]["Function"]["Environment"]["Variables"];
    assert_eq!(
        pick(&env["REDIS_AUTH_SECRET_ARN"], &["HasCacheAuthSecret"]),
        &json!({"Fn::GetAtt": ["CacheAuthSecret", "Id"]})
    );
    // The local cloud's token is kept in the secret too, so its functions read it as in AWS.
    assert_eq!(
        t["Conditions"]["HasCacheAuthSecret"],
        json!({"Fn::Or": [{"Condition": "CacheTls"}, {"Condition": "HasDevCacheAuthToken"}]})
    );
    // The development token counts only against an emulator, and takes an empty answer from
    // `sam deploy --guided` (which asks a NoEcho parameter again until it gets a value).
    assert_eq!(t["Conditions"]["HasDevCacheAuthToken"]["Fn::And"][0], json!({"Condition": "HasAwsEndpointUrl"}));
    assert!(t["Parameters"]["DevCacheAuthToken"]["NoEcho"].is_null(), "DevCacheAuthToken is not NoEcho");
    for name in [
        "ReleaseFunction",
        "QueryFunction",
        "VerifyHashFunction",
        "GrabFunction",
        "MailFunction",
        "ReconcileFunction",
        "DoorFunction",
    ] {
        let policies = t["Resources"][name]["Properties"]["Policies"].to_string();
        assert_eq!(policies.contains("CacheAuthSecret"), name != "DoorFunction", "{name}");
    }
}

/// The figures the docs take from the template by hand fail here when they drift (the parameter
/// table is written by `cargo xtask gen`): docs/DEPLOY.md's outputs (every one), its count of
/// functions, its memory and timeout table, and docs/SECURITY.md's sum of reserved concurrency.
#[test]
fn the_docs_figures_are_the_templates() {
    let t = template();
    let deploy = std::fs::read_to_string(repo_root().join("docs/DEPLOY.md")).unwrap();
    let ticked = |cell: &str| -> Vec<String> { cell.split('`').skip(1).step_by(2).map(str::to_owned).collect() };

    let outputs = deploy.split("The outputs (").nth(1).expect("DEPLOY's outputs").split(".\n").next().unwrap();
    let listed: BTreeSet<String> = ticked(outputs).into_iter().filter(|o| !o.starts_with("sam ")).collect();
    let declared: BTreeSet<String> = t["Outputs"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(listed, declared, "DEPLOY lists every output");

    let functions = resources_of_type(&t, "AWS::Serverless::Function");
    let words =
        ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"];
    let count = format!("{} Rust functions", words[functions.len()]);
    assert!(deploy.contains(&count), "DEPLOY says \"{count}\"");

    // The runbook acts on the stack the operator means (`$STACK`: the default environment's or
    // production's), never on one it names; the load kit is a stack of its own.
    for named in deploy.split("--stack-name ").skip(1) {
        let stack = named.split(|c: char| c.is_whitespace() || c == '`').next().unwrap();
        assert!(stack == "$STACK" || stack == "ticketgrab-loadkit", "DEPLOY names a stack: --stack-name {stack}");
    }

    // The interface endpoints VpcEndpoints=create makes (DEPLOY's prerequisites, BENCHMARKS' costs).
    let interface = resources_of_type(&t, "AWS::EC2::VPCEndpoint")
        .iter()
        .filter(|(_, e)| e["Properties"]["VpcEndpointType"] == "Interface")
        .count();
    let endpoints = format!("{} interface endpoints", words[interface]);
    assert!(deploy.contains(&format!("the default: {endpoints}")), "DEPLOY says {endpoints}");
    let benchmarks = std::fs::read_to_string(repo_root().join("docs/BENCHMARKS.md")).unwrap();
    assert!(benchmarks.contains(&format!("`VpcEndpoints=create`, {endpoints}")), "BENCHMARKS says {endpoints}");

    // "Memory, timeouts and why": a row per function, with the template's figures.
    let table = deploy.split("| function | memory | timeout | why |").nth(1).expect("DEPLOY's memory table");
    let table = table.split("\n\n").next().unwrap();
    let documented: BTreeMap<String, (u64, u64)> = table
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("|---"))
        .map(|row| {
            let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
            let figure = |cell: &str, unit: &str| cell.strip_suffix(unit).unwrap().trim().parse::<u64>().unwrap();
            (cells[0].to_owned(), (figure(cells[1], "MB"), figure(cells[2], "s")))
        })
        .collect();
    let global = &t["Globals"]["Function"];
    let declared: BTreeMap<String, (u64, u64)> = functions
        .iter()
        .map(|(_, f)| {
            let p = &f["Properties"];
            let figure = |key: &str| p[key].as_u64().or(global[key].as_u64()).unwrap();
            let binary = f["Metadata"]["BuildProperties"]["Binary"].as_str().unwrap().to_owned();
            (binary, (figure("MemorySize"), figure("Timeout")))
        })
        .collect();
    assert_eq!(documented, declared, "DEPLOY's memory and timeout of each function are the template's");

    let reserved = |production: bool| -> u64 {
        functions
            .iter()
            .map(|(_, f)| match &f["Properties"]["ReservedConcurrentExecutions"] {
                Value::Number(n) => n.as_u64().unwrap(),
                conditional => {
                    let parameter = conditional["Fn::If"][1]["Ref"].as_str().expect("a reserved-concurrency parameter");
                    let set = production.then(|| production_override(parameter)).flatten();
                    set.map_or_else(|| t["Parameters"][parameter]["Default"].as_u64().unwrap(), |n| n.parse().unwrap())
                }
            })
            .sum()
    };
    let security = std::fs::read_to_string(repo_root().join("docs/SECURITY.md")).unwrap();
    let (defaults, production) = (reserved(false), reserved(true));
    assert!(
        security.contains(&format!("the defaults reserve {defaults}")),
        "SECURITY says the defaults reserve {defaults}"
    );
    assert!(
        security.contains(&format!("production's environment reserves {production}")),
        "SECURITY says production's environment reserves {production}"
    );
}

/// Teardown loses nothing a user holds (docs/DEPLOY.md, "Tearing down"): every resource that
/// holds state says what `sam delete` does with it, and what users hold is kept: the user pool
/// and its groups (every order is keyed by a user's `sub`), the pass keys (every mailed pass
/// verifies with them), the table.
#[test]
fn teardown_keeps_what_users_hold_and_every_stateful_resource_says_what_becomes_of_it() {
    let t = template();
    let stateful = [
        "AWS::Cognito::UserPool",
        "AWS::Cognito::UserPoolGroup",
        "AWS::Cognito::UserPoolDomain",
        "AWS::SecretsManager::Secret",
        "AWS::DynamoDB::Table",
        "AWS::SQS::Queue",
        "AWS::ElastiCache::ReplicationGroup",
        "AWS::SES::EmailIdentity",
        "AWS::KMS::Key",
        "AWS::SNS::Topic",
        "AWS::Logs::LogGroup",
    ];
    let kept = [
        "UserPool",
        "AdminGroup",
        "StaffGroup",
        "PassKeySecret",
        "PassPublicKeysSecret",
        "Table",
        "OrdersDeadLetterQueue",
    ];
    let mut seen = Vec::new();
    for kind in stateful {
        for (name, resource) in resources_of_type(&t, kind) {
            let policies = (resource["DeletionPolicy"].as_str(), resource["UpdateReplacePolicy"].as_str());
            // Kept at a teardown, and on an update that replaces them; not when the stack's first
            // create fails and rolls back (RetainExceptOnCreate), so the retry meets no leftover
            // of its own (the DLQ's name, a table) and nothing is billed for a stack that never was.
            // The table stays Retain: its deletion protection would stop a failed create's rollback.
            let wanted = if name == "Table" {
                (Some("Retain"), Some("Retain"))
            } else if kept.contains(&name.as_str()) {
                (Some("RetainExceptOnCreate"), Some("Retain"))
            } else {
                (Some("Delete"), Some("Delete"))
            };
            assert_eq!(policies, wanted, "{name} ({kind})");
            seen.push(name.as_str());
        }
    }
    for name in kept {
        assert!(seen.contains(&name), "{name} is in the template");
    }
}

/// The edge (`Edge=cloudfront`, off by default): the sale's state, the one public route, cached
/// no longer than its reply says (a second); every other path uncached, the bearer token in the
/// cache key (so one user's reply can never be served to another), no error reply kept; a rate
/// rule per client address in the web ACL the stack makes.
#[test]
fn the_edge_caches_the_sales_state_a_second_and_nothing_of_a_users() {
    let t = template();
    let r = &t["Resources"];
    assert_eq!(t["Parameters"]["Edge"]["Default"], "none");
    for name in ["EdgeDistribution", "EdgeStateCachePolicy", "EdgeApiCachePolicy"] {
        assert_eq!(r[name]["Condition"], "HasEdge", "{name} only with the edge");
    }
    let d = &r["EdgeDistribution"]["Properties"]["DistributionConfig"];
    let public: Vec<_> = shared::http::routes::ROUTES.iter().filter(|r| r.public()).collect();
    let behaviours = d["CacheBehaviors"].as_array().unwrap();
    assert_eq!(behaviours.len(), public.len(), "a cached behaviour for each public route, no other");
    let state = &behaviours[0];
    assert_eq!(state["PathPattern"], public[0].path.replace("{id}", "*"));
    assert_eq!(state["AllowedMethods"], json!(["GET", "HEAD"]));
    assert_eq!(state["CachePolicyId"], json!({"Ref": "EdgeStateCachePolicy"}));
    let cached = &r["EdgeStateCachePolicy"]["Properties"]["CachePolicyConfig"];
    let max_age: u64 = shared::handlers::query::STATE_CACHE_CONTROL
        .split("max-age=")
        .nth(1)
        .and_then(|v| v.split(',').next())
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(cached["DefaultTTL"], max_age);
    assert!(cached["MaxTTL"].as_u64().unwrap() <= 2 * max_age, "a sell-out shows within seconds");
    // Origin alone in the key: the API's CORS answer is per origin, so a page on another origin
    // reads the state through the edge, and no origin is served another's answer; nothing of a
    // user's (no Authorization) is in it.
    let headers = &cached["ParametersInCacheKeyAndForwardedToOrigin"]["HeadersConfig"];
    assert_eq!((&headers["HeaderBehavior"], &headers["Headers"]), (&json!("whitelist"), &json!(["Origin"])));
    // The WAF's rate rule counts what costs a function: the cached state is left out.
    let rule = &r["EdgeWebAcl"]["Properties"]["Rules"][0]["Statement"]["RateBasedStatement"];
    let left_out = &rule["ScopeDownStatement"]["NotStatement"]["Statement"]["RegexMatchStatement"]["RegexString"];
    let pattern = format!("^{}$", public[0].path.replace("{id}", "[^/]+"));
    assert_eq!(left_out, &json!(pattern), "the state's path left out of the rate rule");

    let default = &d["DefaultCacheBehavior"];
    assert_eq!(default["CachePolicyId"], json!({"Ref": "EdgeApiCachePolicy"}));
    for method in ["POST", "DELETE"] {
        assert!(default["AllowedMethods"].as_array().unwrap().contains(&json!(method)), "{method} passes through");
    }
    let api = &r["EdgeApiCachePolicy"]["Properties"]["CachePolicyConfig"];
    assert_eq!(api["DefaultTTL"], 0);
    assert_eq!(api["ParametersInCacheKeyAndForwardedToOrigin"]["HeadersConfig"]["Headers"], json!(["Authorization"]));

    // CloudFront keeps an error 10 s unless told (whatever its Cache-Control): no code it caches
    // may be kept (a `403 SALE_NOT_STARTED` outliving the opening).
    let kept: BTreeMap<u64, u64> = d["CustomErrorResponses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["ErrorCode"].as_u64().unwrap(), e["ErrorCachingMinTTL"].as_u64().unwrap()))
        .collect();
    for code in [400, 403, 404, 405, 414, 416, 500, 501, 502, 503, 504] {
        assert_eq!(kept.get(&code), Some(&0), "{code} is not kept at the edge");
    }
    let rule = &r["EdgeWebAcl"]["Properties"]["Rules"][0]["Statement"]["RateBasedStatement"];
    assert_eq!(rule["AggregateKeyType"], "IP");
    assert_eq!(rule["Limit"], json!({"Ref": "EdgeRateLimit"}));
    assert_eq!(r["EdgeWebAcl"]["Properties"]["Scope"], "CLOUDFRONT");
}

/// DESIGN's hand-written copies of the route table (section 16 lists them): section 4's table of
/// replies names exactly the table's routes, and section 2's runtime picture every route's path
/// and method, beside the function that serves it.
#[test]
fn designs_table_of_replies_and_its_picture_name_every_route() {
    use shared::http::routes::ROUTES;
    let design = std::fs::read_to_string(repo_root().join("docs/DESIGN.md")).unwrap();
    let section = |n: &str| {
        let start = design.find(&format!("\n## {n}. ")).unwrap_or_else(|| panic!("DESIGN has a section {n}"));
        let rest = &design[start + 1..];
        rest[..rest[3..].find("\n## ").map_or(rest.len(), |e| e + 3)].to_owned()
    };
    let replies = section("4");
    let documented: BTreeSet<String> = replies
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(|key| key.split(['[', ' ']).take(2).collect::<Vec<_>>().join(" "))
        .map(|key| key.split('[').next().unwrap().trim_end_matches('?').to_owned())
        .filter(|key| key.starts_with(['G', 'P', 'D']))
        .collect();
    let served: BTreeSet<String> = ROUTES.iter().map(|r| r.key()).collect();
    assert_eq!(documented, served, "section 4's table names the route table's routes");

    let picture = section("2");
    for r in ROUTES.iter() {
        let line = picture
            .lines()
            .find(|l| {
                l.split_whitespace().any(|w| w.split(',').any(|p| p == r.path))
                    && l.split_whitespace().any(|w| w.split('|').any(|m| m == r.method))
            })
            .unwrap_or_else(|| panic!("section 2's picture lacks {}", r.key()));
        assert!(line.contains(r.function.name()), "section 2 says which function serves {}: {line}", r.key());
    }
}
