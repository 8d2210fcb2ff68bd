//! Provisions the emulator as the template provisions AWS: the table with both GSIs, the orders
//! queue with its DLQ and redrive, the sender identity, and the secrets under the names `env.json`
//! gives `sam local invoke`. Idempotent: what exists is kept (a secret takes the current value).

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection, ProjectionType,
    ScalarAttributeType,
};
use aws_sdk_sqs::types::QueueAttributeName;
use shared::store::schema::{INDEXES, KEY_ATTRIBUTES, attr};

/// Seconds a received message stays invisible: six times the mail function's timeout (30 s), as in
/// `template.yaml`.
pub const VISIBILITY_TIMEOUT_SECONDS: u32 = 180;
/// Receives before SQS moves a message to the DLQ.
pub const MAX_RECEIVE_COUNT: u32 = 5;
/// How long the DLQ keeps a message: the maximum, 14 days, so an operator has time to redrive.
pub const DLQ_RETENTION_SECONDS: u32 = 1_209_600;
/// The DLQ's name beside its queue's.
pub fn dead_letter_queue_name(queue: &str) -> String {
    format!("{queue}-dlq")
}

#[derive(Debug, thiserror::Error)]
#[error("provisioning {what}: {detail}")]
pub struct ProvisionError {
    what: &'static str,
    detail: String,
}

fn fail(what: &'static str) -> impl FnOnce(String) -> ProvisionError {
    move |detail| ProvisionError { what, detail }
}

fn queues_failed<E: std::error::Error>(e: E) -> ProvisionError {
    fail("queues")(aws_sdk_sqs::error::DisplayErrorContext(e).to_string())
}

pub struct Provisioned {
    pub queue_url: String,
}

pub async fn all(
    sdk: &aws_config::SdkConfig,
    table: &str,
    queue: &str,
    sender: &str,
) -> Result<Provisioned, ProvisionError> {
    ensure_table(&aws_sdk_dynamodb::Client::new(sdk), table).await?;
    let (queue_url, _) = ensure_queues(&aws_sdk_sqs::Client::new(sdk), queue).await?;
    ensure_sender(&aws_sdk_sesv2::Client::new(sdk), sender).await?;
    ensure_secrets(&aws_sdk_secretsmanager::Client::new(sdk), &crate::settings::development_secrets()).await?;
    Ok(Provisioned { queue_url })
}

pub async fn ensure_table(client: &aws_sdk_dynamodb::Client, table: &str) -> Result<(), ProvisionError> {
    let key = |name: &str, kind: KeyType| KeySchemaElement::builder().attribute_name(name).key_type(kind).build();
    let mut create = client.create_table().table_name(table).billing_mode(BillingMode::PayPerRequest);
    for (name, kind) in KEY_ATTRIBUTES {
        let kind = if kind == "N" { ScalarAttributeType::N } else { ScalarAttributeType::S };
        create = create.attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name(name)
                .attribute_type(kind)
                .build()
                .map_err(|e| fail("table")(e.to_string()))?,
        );
    }
    create = create
        .key_schema(key(attr::PK, KeyType::Hash).map_err(|e| fail("table")(e.to_string()))?)
        .key_schema(key(attr::SK, KeyType::Range).map_err(|e| fail("table")(e.to_string()))?);
    for (index, pk, sk) in INDEXES {
        create = create.global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name(index)
                .key_schema(key(pk, KeyType::Hash).map_err(|e| fail("table")(e.to_string()))?)
                .key_schema(key(sk, KeyType::Range).map_err(|e| fail("table")(e.to_string()))?)
                .projection(Projection::builder().projection_type(ProjectionType::All).build())
                .build()
                .map_err(|e| fail("table")(e.to_string()))?,
        );
    }
    match create.send().await {
        Ok(_) => Ok(()),
        Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_in_use_exception()) => Ok(()),
        Err(e) => Err(fail("table")(aws_sdk_dynamodb::error::DisplayErrorContext(e).to_string())),
    }
}

pub async fn ensure_queues(client: &aws_sdk_sqs::Client, queue: &str) -> Result<(String, String), ProvisionError> {
    ensure_queues_with(client, queue, VISIBILITY_TIMEOUT_SECONDS).await
}

/// The orders queue and its DLQ with another visibility timeout (tests that watch redelivery).
pub async fn ensure_queues_with(
    client: &aws_sdk_sqs::Client,
    queue: &str,
    visibility_timeout_seconds: u32,
) -> Result<(String, String), ProvisionError> {
    let dlq_attributes = [(QueueAttributeName::MessageRetentionPeriod, DLQ_RETENTION_SECONDS.to_string())];
    let dlq_url = ensure_queue(client, &dead_letter_queue_name(queue), &dlq_attributes).await?;
    let dlq_arn = client
        .get_queue_attributes()
        .queue_url(&dlq_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(queues_failed)?
        .attributes
        .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
        .unwrap_or_default();
    let redrive =
        serde_json::json!({ "deadLetterTargetArn": dlq_arn, "maxReceiveCount": MAX_RECEIVE_COUNT.to_string() });
    let attributes = [
        (QueueAttributeName::VisibilityTimeout, visibility_timeout_seconds.to_string()),
        (QueueAttributeName::RedrivePolicy, redrive.to_string()),
    ];
    let queue_url = ensure_queue(client, queue, &attributes).await?;
    Ok((queue_url, dlq_url))
}

/// Creates the queue, or brings an existing one (an older stack's state) to these attributes.
async fn ensure_queue(
    client: &aws_sdk_sqs::Client,
    name: &str,
    attributes: &[(QueueAttributeName, String)],
) -> Result<String, ProvisionError> {
    let mut create = client.create_queue().queue_name(name);
    for (k, v) in attributes {
        create = create.attributes(k.clone(), v);
    }
    match create.send().await {
        Ok(out) => Ok(out.queue_url.unwrap_or_default()),
        Err(e) if e.as_service_error().is_some_and(|s| s.is_queue_name_exists()) => {
            let url = client
                .get_queue_url()
                .queue_name(name)
                .send()
                .await
                .map_err(queues_failed)?
                .queue_url
                .unwrap_or_default();
            let mut set = client.set_queue_attributes().queue_url(&url);
            for (k, v) in attributes {
                set = set.attributes(k.clone(), v);
            }
            set.send().await.map_err(queues_failed)?;
            Ok(url)
        }
        Err(e) => Err(queues_failed(e)),
    }
}

pub async fn ensure_sender(client: &aws_sdk_sesv2::Client, sender: &str) -> Result<(), ProvisionError> {
    match client.create_email_identity().email_identity(sender).send().await {
        Ok(_) => Ok(()),
        Err(e) if e.as_service_error().is_some_and(|s| s.is_already_exists_exception()) => Ok(()),
        Err(e) => Err(fail("sender identity")(aws_sdk_sesv2::error::DisplayErrorContext(e).to_string())),
    }
}

/// Each `(name, value)` as a Secrets Manager secret: created, or given this value if it exists.
pub async fn ensure_secrets(
    client: &aws_sdk_secretsmanager::Client,
    secrets: &[(&str, String)],
) -> Result<(), ProvisionError> {
    let failed = |e: String| fail("secrets")(e);
    for (name, value) in secrets {
        match client.create_secret().name(*name).secret_string(value).send().await {
            Ok(_) => {}
            Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_exists_exception()) => {
                client
                    .put_secret_value()
                    .secret_id(*name)
                    .secret_string(value)
                    .send()
                    .await
                    .map_err(|e| failed(aws_sdk_secretsmanager::error::DisplayErrorContext(e).to_string()))?;
            }
            Err(e) => return Err(failed(aws_sdk_secretsmanager::error::DisplayErrorContext(e).to_string())),
        }
    }
    Ok(())
}
