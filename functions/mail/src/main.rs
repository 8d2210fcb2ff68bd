//! The mail function: the orders queue's consumer (SQS event source mapping with
//! `ReportBatchItemFailures`). Builds its dependencies once; the handler lives in
//! `shared::handlers::mail`.

use aws_lambda_events::sqs::SqsEvent;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use shared::handlers::mail::Mail;

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::telemetry::init();
    let mail = Mail::from_env().await?;
    let mail = &mail;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        Ok::<_, Error>(mail.handle_batch(event.payload).await)
    }))
    .await
}
