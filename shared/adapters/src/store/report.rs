//! What the organiser's report reads of an event in DynamoDB: every ticket item and every order.

use super::{
    Store, StoreError, built,
    codec::{Item, get_s, s},
    orders::AttendeeRow,
    schema::{attr, key},
};
use domain::{EventId, OrderId, TicketNo};

impl Store {
    /// Every ticket item of the event (number -> the order id it names), read consistently: the
    /// audit compares them with the orders. One batch read per 100 numbers of the capacity.
    pub async fn ticket_items(
        &self,
        event: &EventId,
        capacity: u32,
    ) -> Result<std::collections::HashMap<TicketNo, OrderId>, StoreError> {
        let numbers: Vec<TicketNo> = (1..=capacity).map(TicketNo::new).collect();
        let batches: Vec<&[TicketNo]> = numbers.chunks(100).collect();
        let mut tickets = std::collections::HashMap::new();
        // Eight batches at a time.
        for group in batches.chunks(8) {
            let found = futures::future::try_join_all(group.iter().map(|b| self.ticket_batch(event, b))).await?;
            tickets.extend(found.into_iter().flatten());
        }
        Ok(tickets)
    }

    async fn ticket_batch(
        &self,
        event: &EventId,
        numbers: &[TicketNo],
    ) -> Result<Vec<(TicketNo, OrderId)>, StoreError> {
        use aws_sdk_dynamodb::types::KeysAndAttributes;
        let mut keys: Vec<Item> = numbers
            .iter()
            .map(|n| {
                Item::from([(attr::PK.to_owned(), s(key::ticket(event, *n))), (attr::SK.to_owned(), s(key::TICKET_SK))])
            })
            .collect();
        let mut found = Vec::new();
        while !keys.is_empty() {
            let request = built(KeysAndAttributes::builder().set_keys(Some(keys)).consistent_read(true).build())?;
            let out = self.client.batch_get_item().request_items(&self.table, request).send().await?;
            for item in out.responses.as_ref().and_then(|r| r.get(&self.table)).into_iter().flatten() {
                let n: TicketNo = get_s(item, attr::PK)?
                    .rsplit('#')
                    .next()
                    .and_then(|n| n.parse().ok())
                    .ok_or_else(|| StoreError::Malformed("ticket key".into()))?;
                found.push((
                    n,
                    OrderId::parse(&get_s(item, "order_id")?).map_err(|e| StoreError::Malformed(e.to_string()))?,
                ));
            }
            keys = out.unprocessed_keys.and_then(|mut u| u.remove(&self.table)).map(|k| k.keys).unwrap_or_default();
        }
        Ok(found)
    }

    /// The ids of every stored order of an event (reconcile's drift check).
    pub async fn order_ids(&self, event: &EventId) -> Result<std::collections::HashSet<OrderId>, StoreError> {
        self.event_order_items(event)
            .await?
            .iter()
            .map(|item| OrderId::parse(&get_s(item, "order_id")?).map_err(|e| StoreError::Malformed(e.to_string())))
            .collect()
    }

    /// Every stored order of an event (confirmed, rejected and cancelled), by ticket number: the
    /// organiser's report.
    pub async fn all_orders(&self, event: &EventId) -> Result<Vec<AttendeeRow>, StoreError> {
        let mut rows =
            self.event_order_items(event).await?.iter().map(AttendeeRow::from_item).collect::<Result<Vec<_>, _>>()?;
        rows.sort_by(|a, b| (a.ticket_no, &a.order_id).cmp(&(b.ticket_no, &b.order_id)));
        Ok(rows)
    }
}
