//! The per-user request counters of the routes the grab script does not count itself.

use super::{Gate, GateError, keys};
use crate::config::UserLimit;
use domain::UserId;

impl Gate {
    /// Counts one request of `user` to `function` in a fixed window (one round trip: `INCR`, an
    /// expiry set only by the window's first request, `PTTL`). Returns the wait in milliseconds
    /// when the user is over the limit.
    pub async fn count_request(
        &self,
        user: &UserId,
        function: &str,
        limit: UserLimit,
    ) -> Result<Option<u64>, GateError> {
        let key = keys::user_requests(user, function);
        let window = limit.window.as_millis() as u64;
        let (count, ttl): (u64, i64) = redis::pipe()
            .incr(&key, 1)
            .cmd("PEXPIRE")
            .arg(&key)
            .arg(window)
            .arg("NX")
            .ignore()
            .cmd("PTTL")
            .arg(&key)
            .query_async(&mut self.link.conn().await?)
            .await?;
        Ok((count > u64::from(limit.requests)).then(|| ttl.clamp(1, window as i64) as u64))
    }
}
