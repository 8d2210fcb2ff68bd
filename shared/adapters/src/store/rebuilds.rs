//! The record of each exact rebuild of an event's cache (docs/DESIGN.md section 10): when it read
//! what it laid down, and how many orders were still on the queue then. The audit reads them: a
//! `REJECTED` order is explained only by a rebuild that read before the order was stored while
//! orders were still in flight (`Report::with_rebuilds`).

use time::OffsetDateTime;

use super::{
    Store, StoreError,
    codec::{get_n, n, opt_n, s},
    schema::{attr, key},
};
use domain::{EventId, audit::RebuildRecord, event::epoch_ms};

impl Store {
    /// Records a rebuild that read its snapshot at `read_at` with `in_flight` messages still on
    /// the queue (0 when it waited for the queue to drain; `None`: the depth could not be read). One item per rebuild (`token` is its
    /// lock's), written before it lays anything down.
    pub async fn record_rebuild(
        &self,
        event: &EventId,
        token: &str,
        read_at: OffsetDateTime,
        in_flight: Option<u64>,
        promoted_free: u64,
    ) -> Result<(), StoreError> {
        let read_ms = epoch_ms(read_at);
        let mut put = self
            .client
            .put_item()
            .table_name(&self.table)
            .item(attr::PK, s(key::rebuilds(event)))
            .item(attr::SK, s(format!("{read_ms:015}#{token}")))
            .item("read_ms", n(read_ms))
            .item("promoted_free", n(promoted_free));
        if let Some(in_flight) = in_flight {
            put = put.item("in_flight", n(in_flight));
        }
        put.send().await?;
        Ok(())
    }

    /// Every rebuild recorded for the event, oldest first.
    pub async fn rebuilds(&self, event: &EventId) -> Result<Vec<RebuildRecord>, StoreError> {
        self.partition(key::rebuilds(event), None)
            .await?
            .iter()
            .map(|item| {
                Ok(RebuildRecord {
                    read_ms: get_n(item, "read_ms")?,
                    in_flight: opt_n(item, "in_flight")?,
                    promoted_free: opt_n(item, "promoted_free")?.unwrap_or(0),
                })
            })
            .collect()
    }
}
