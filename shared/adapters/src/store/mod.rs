//! DynamoDB, the source of truth: one table, no hot key (docs/DESIGN.md section 8).
//!
//! | item   | PK                  | SK       | indexes                                                  |
//! |--------|---------------------|----------|----------------------------------------------------------|
//! | event  | `EVENT#<E>`         | `META`   | GSI1 `EVENTS` / `<sale_start>#<E>` (the event list)       |
//! | order  | `ORDER#<E>#<user>`  | `ORDER`  | GSI1 `USER#<u>` / `EVENT#<E>`; GSI2 `EVENT#<E>#<n%16>` / n |
//! | ticket | `TICKET#<E>#<n>`    | `TICKET` |                                                          |
//! | give-back marker | `RETURN#<E>` | `ORDER#<order id>` | a cancelled number Redis has yet to take back |
//! | waiter | `WAIT#<E>`          | `USER#<u>` | a place on the waitlist (`waitlist`)                   |
//! | entry  | `ENTRY#<E>#<shard>` | `USER#<u>` | a ballot's entry or a fair open's place (`draws`; `ENTRY#<E>` before the entries were spread) |
//! | roll part | `ROLL#<E>#<shard>` | `<part>` | a shard's entrants as the draw read them (`draws`)  |
//! | rebuild | `REBUILD#<E>`      | `<read ms>#<token>` | one exact rebuild of the cache (`rebuilds`)     |
//!
//! Cancelled orders move to GSI2 `EVENT#<E>#CANCELLED`, rejected ones sit in `EVENT#<E>#REJECTED`:
//! off the attendee list, found by a rebuild and the organiser's report.
//!
//! By item: [`events`], [`orders`] (with tickets), [`cancellations`] (and their give-back markers),
//! [`check_in`], [`report`] (the organiser's reads) and [`waitlist`] hold each item's reads beside
//! its writes;
//! [`schema`] builds every key, [`codec`] every attribute value.

pub mod cancellations;
pub mod check_in;
pub mod codec;
pub mod draws;
pub mod events;
pub mod orders;
pub mod rebuilds;
pub mod report;
pub mod schema;
pub mod waitlist;

use aws_sdk_dynamodb::{
    Client,
    operation::query::{QueryOutput, builders::QueryFluentBuilder},
};

pub use events::{BadCursor, EventBook, ListError, MISS_KEPT, PutEventError, StoredEvent};
pub use orders::AttendeeRow;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("dynamodb: {0}")]
    Dynamo(String),
    #[error("stored item is malformed: {0}")]
    Malformed(String),
}

impl<E> From<aws_sdk_dynamodb::error::SdkError<E>> for StoreError
where
    E: std::error::Error + aws_sdk_dynamodb::error::ProvideErrorMetadata + Send + Sync + 'static,
{
    fn from(e: aws_sdk_dynamodb::error::SdkError<E>) -> Self {
        Self::Dynamo(crate::aws::error_summary(&e))
    }
}

/// One page of a listing and where the next one starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next: Option<String>,
}

#[derive(Clone)]
pub struct Store {
    client: Client,
    table: String,
}

impl Store {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self { client, table: table.into() }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn table(&self) -> &str {
        &self.table
    }
}

/// A request the SDK's builder refused to build, as a store error.
fn built<T, E: std::fmt::Display>(r: Result<T, E>) -> Result<T, StoreError> {
    r.map_err(|e| StoreError::Dynamo(e.to_string()))
}

impl Store {
    /// Every item of one partition, read consistently page after page; with `status`, only the
    /// items whose `status` is that.
    async fn partition(&self, pk: String, status: Option<&str>) -> Result<Vec<codec::Item>, StoreError> {
        let mut query = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("#pk = :pk")
            .expression_attribute_names("#pk", schema::attr::PK)
            .expression_attribute_values(":pk", codec::s(&pk))
            .consistent_read(true);
        if let Some(status) = status {
            query = query
                .filter_expression("#status = :status")
                .expression_attribute_names("#status", "status")
                .expression_attribute_values(":status", codec::s(status));
        }
        self.query_all(query).await
    }

    /// Every item a query returns, page after page.
    async fn query_all(&self, query: QueryFluentBuilder) -> Result<Vec<codec::Item>, StoreError> {
        let mut all = Vec::new();
        self.query_pages(query, |page| {
            all.extend(page.items.unwrap_or_default());
            Ok(true)
        })
        .await?;
        Ok(all)
    }

    /// A query's pages (DynamoDB's 1 MB each), each handed to `each` as it comes, until the last
    /// or until `each` says stop (`false`): the one place a read goes on from where a page ended.
    async fn query_pages(
        &self,
        query: QueryFluentBuilder,
        mut each: impl FnMut(QueryOutput) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError> {
        let mut start = None;
        loop {
            let page = query.clone().set_exclusive_start_key(start).send().await?;
            start = page.last_evaluated_key.clone();
            if !each(page)? || start.is_none() {
                return Ok(());
            }
        }
    }
}
