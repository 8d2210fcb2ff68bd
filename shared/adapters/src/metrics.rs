//! CloudWatch metrics in Embedded Metric Format (docs/DESIGN.md section 12): one JSON line on stdout per
//! outcome, which CloudWatch Logs turns into metrics with no API call on the request path. Metrics
//! go to the namespace `TicketGrab`:
//!
//! - `Requests` (count) and `Latency` (ms) by `Function` and `Outcome`: each HTTP reply's code
//!   (`OK`, `ALREADY`, `SOLD_OUT`, `BUSY`, ...), each mail message's outcome (`CONFIRMED_AND_MAILED`,
//!   `REJECTED`, `FAILED`, ...);
//! - `OutboxSize`, `Redriven`, `Cleared`, `Rebuilt` by `Function` (reconcile, each run).
//!
//! Lines are written only inside Lambda (`AWS_LAMBDA_FUNCTION_NAME` set): the local runner and the
//! tests would only print noise.

use std::{io::Write, sync::LazyLock};

use serde_json::{Value, json};

pub const NAMESPACE: &str = "TicketGrab";

static IN_LAMBDA: LazyLock<bool> = LazyLock::new(|| std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_some());

/// One request or message handled by `function` with `outcome`.
pub fn outcome(function: &str, outcome: &str, latency_ms: f64) {
    emit(&outcome_line(function, outcome, latency_ms, now_ms()));
}

/// Counts (or sizes) measured once per run of `function`.
pub fn counts(function: &str, values: &[(&str, u64)]) {
    emit(&counts_line(function, values, now_ms()));
}

pub fn outcome_line(function: &str, outcome: &str, latency_ms: f64, timestamp_ms: i64) -> Value {
    json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": [["Function", "Outcome"]],
                "Metrics": [{"Name": "Requests", "Unit": "Count"}, {"Name": "Latency", "Unit": "Milliseconds"}],
            }],
        },
        "Function": function,
        "Outcome": outcome,
        "Requests": 1,
        "Latency": (latency_ms * 1000.0).round() / 1000.0,
    })
}

pub fn counts_line(function: &str, values: &[(&str, u64)], timestamp_ms: i64) -> Value {
    let mut line = json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": [["Function"]],
                "Metrics": values.iter().map(|(name, _)| json!({"Name": name, "Unit": "Count"})).collect::<Vec<_>>(),
            }],
        },
        "Function": function,
    });
    for (name, value) in values {
        line[*name] = json!(value);
    }
    line
}

fn now_ms() -> i64 {
    (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64
}

fn emit(line: &Value) {
    if *IN_LAMBDA {
        // One write per line, so it never interleaves with a log line.
        let _ = std::io::stdout().lock().write_all(format!("{line}\n").as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outcome_line_declares_its_metrics_and_carries_their_values() {
        let line = outcome_line("grab", "SOLD_OUT", 12.34567, 1_795_000_000_000);
        let spec = &line["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(line["_aws"]["Timestamp"], 1_795_000_000_000_i64);
        assert_eq!(spec["Namespace"], "TicketGrab");
        assert_eq!(spec["Dimensions"], json!([["Function", "Outcome"]]));
        // Every declared metric and dimension has a value at the top level, as EMF requires.
        for m in spec["Metrics"].as_array().unwrap() {
            assert!(line[m["Name"].as_str().unwrap()].is_number(), "{m}");
        }
        assert_eq!((line["Function"].as_str(), line["Outcome"].as_str()), (Some("grab"), Some("SOLD_OUT")));
        assert_eq!(line["Latency"], 12.346);
    }

    #[test]
    fn a_counts_line_has_one_metric_per_value() {
        let line = counts_line("reconcile", &[("OutboxSize", 7), ("Redriven", 2)], 1);
        let spec = &line["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(spec["Dimensions"], json!([["Function"]]));
        assert_eq!(spec["Metrics"].as_array().unwrap().len(), 2);
        assert_eq!((line["OutboxSize"].as_u64(), line["Redriven"].as_u64()), (Some(7), Some(2)));
    }
}
