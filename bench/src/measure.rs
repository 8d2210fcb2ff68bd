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

/// Zeroes (`-z`) or dumps (`-d`) the counters of the redis-server running under callgrind.
pub fn callgrind_control(flag: &str) -> Result<(), Box<dyn std::error::Error>> {
    let status =
        std::process::Command::new("callgrind_control").arg(flag).stdout(std::process::Stdio::null()).status()?;
    if !status.success() {
        return Err(format!("callgrind_control {flag}: {status}").into());
    }
    Ok(())
}

/// Dumps the counters and reads the new dump's total instructions (`summary:`/`totals:` line).
pub fn dumped_instructions(dir: &std::path::Path) -> Result<f64, Box<dyn std::error::Error>> {
    let newest = |dir: &std::path::Path| -> std::io::Result<Option<(std::time::SystemTime, std::path::PathBuf)>> {
        let mut newest = None;
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let modified = entry.metadata()?.modified()?;
            if newest.as_ref().is_none_or(|(t, _)| modified > *t) {
                newest = Some((modified, entry.path()));
            }
        }
        Ok(newest)
    };
    let before = newest(dir)?;
    callgrind_control("-d")?;
    let after = newest(dir)?.ok_or("no callgrind dump")?;
    if before.as_ref().is_some_and(|(t, p)| *p == after.1 && *t == after.0) {
        return Err("callgrind wrote no new dump".into());
    }
    let text = std::fs::read_to_string(&after.1)?;
    text.lines()
        .find_map(|l| l.strip_prefix("summary:").or_else(|| l.strip_prefix("totals:")))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| format!("no totals in {}", after.1.display()).into())
}
