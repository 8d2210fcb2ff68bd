//! The mail function: the orders queue's consumer (SQS event source mapping with
//! `ReportBatchItemFailures`), and an operator's `{"publish": "pass-keys"}` during a pass-key
//! rotation. Builds its dependencies once; the handler lives in `shared::handlers::mail`.

use lambda_runtime::{Error, LambdaEvent, service_fn};
use shared::handlers::mail::{Mail, MailTrigger};

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::telemetry::init();
    let mail = Mail::from_env().await?;
    let mail = &mail;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<serde_json::Value>| async move {
        let trigger = MailTrigger::parse(event.payload)?;
        Ok::<_, Error>(mail.handle(trigger).await)
    }))
    .await
}
