//! What the benchmarks measure with: medians of rounds, and the commands a Redis server ran.

/// The median of a round's figures (the upper one of an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Every command a server ran since its counters were reset ([`reset`]), but the replication's
/// own and the bench's (INFO, CONFIG, REPLCONF, PING...).
pub async fn calls(conn: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<u64> {
    let info: String = redis::cmd("INFO").arg("commandstats").query_async(conn).await?;
    const ASIDE: [&str; 8] = ["info", "config", "replconf", "ping", "psync", "sync", "select", "client"];
    Ok(info
        .lines()
        .filter_map(|l| l.strip_prefix("cmdstat_"))
        .filter(|l| !ASIDE.iter().any(|a| l.starts_with(&format!("{a}:")) || l.starts_with(&format!("{a}|"))))
        .filter_map(|l| l.split("calls=").nth(1)?.split(',').next()?.parse::<u64>().ok())
        .sum())
}

/// Zeroes the server's command counters.
pub async fn reset(conn: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<()> {
    redis::cmd("CONFIG").arg("RESETSTAT").query_async(conn).await
}
