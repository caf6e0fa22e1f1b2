//! The server's journal syncs over a run, read from its `/metrics`: how
//! many there were, and how many took longer than [`SLOW_SYNC_SECS`].
//!
//! Why: every durable append waits for a sync, so one slow device flush
//! holds every conversation in flight at that moment. On this project's
//! virtual disk a sync now and then takes 50–250 ms, and a run that met
//! one has a p99 that says more about the disk than about the server.
//! Counting the slow syncs beside the latencies says which it was.
//!
//! Owns: parsing the flush-duration histogram out of the metrics text,
//! and the difference between two readings (pure, no I/O but
//! [`read`]). Must never: make up a figure the server did not publish
//! (metrics turned off, or no such histogram: `None`).

use std::time::Duration;

use crate::telemetry::LEDGER_FLUSH_SECONDS;

/// A sync slower than this counts as slow, in seconds; one of the
/// server's histogram bounds (`telemetry`'s duration buckets). 50 ms,
/// not 100: a sync of 80 ms, with no slower one, took runs whose p99 was
/// otherwise about 70 ms to 128 and 149 ms (docs/performance.md,
/// 2026-12-06).
pub const SLOW_SYNC_SECS: f64 = 0.05;

/// Largest metrics text read, in bytes (the server's is a few KiB).
pub const MAX_METRICS_BYTES: usize = 1024 * 1024;

/// Longest the metrics request may take, in milliseconds.
pub const METRICS_TIMEOUT_MS: u64 = 5_000;

/// The server's flush-duration histogram at one moment: for each upper
/// bound in seconds (the last one infinite), the syncs that took at most
/// that long, in increasing bounds.
#[derive(Clone, Debug, PartialEq)]
pub struct SyncHistogram(Vec<(f64, u64)>);

/// The syncs of one run.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct SyncReport {
    /// Syncs of the journal (each one device flush).
    pub syncs: u64,
    /// Those that took longer than [`SLOW_SYNC_SECS`].
    pub slow: u64,
    /// The upper bound of the slowest sync's bucket, in milliseconds:
    /// the slowest took at most this long. `None` without a sync, or
    /// when it took longer than the largest finite bound.
    pub slowest_at_most_ms: Option<f64>,
}

impl SyncHistogram {
    /// The histogram in a Prometheus text exposition; `None` if it is
    /// not there or a line of it does not read.
    pub fn parse(metrics: &str) -> Option<Self> {
        let prefix = format!("{LEDGER_FLUSH_SECONDS}_bucket{{le=\"");
        let mut buckets = Vec::new();
        for line in metrics.lines() {
            let Some(rest) = line.strip_prefix(&prefix) else {
                continue;
            };
            let (bound, count) = rest.split_once("\"}")?;
            let bound = match bound {
                "+Inf" => f64::INFINITY,
                finite => finite.parse().ok()?,
            };
            buckets.push((bound, count.trim().parse().ok()?));
        }
        if buckets.is_empty() {
            return None;
        }
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        Some(Self(buckets))
    }

    /// The syncs between this reading and a later one; `None` if their
    /// bounds differ or the slow bound is not one of them.
    pub fn until(&self, later: &Self) -> Option<SyncReport> {
        let same_bounds =
            self.0.len() == later.0.len() && self.0.iter().zip(&later.0).all(|(a, b)| a.0 == b.0);
        if !same_bounds {
            return None;
        }
        let counts: Vec<(f64, u64)> = later
            .0
            .iter()
            .zip(&self.0)
            .map(|(after, before)| (after.0, after.1.saturating_sub(before.1)))
            .collect();
        let syncs = counts.last()?.1;
        let fast = counts.iter().find(|(bound, _)| *bound == SLOW_SYNC_SECS)?.1;
        let slowest = counts
            .iter()
            .find(|(_, count)| syncs > 0 && *count == syncs)
            .map(|(bound, _)| *bound)
            .filter(|bound| bound.is_finite())
            // Milliseconds to the microsecond: 0.0025 s is 2.5 ms, not 2.5000000000000004.
            .map(|bound| (bound * 1e6).round() / 1e3);
        Some(SyncReport {
            syncs,
            slow: syncs.saturating_sub(fast),
            slowest_at_most_ms: slowest,
        })
    }
}

impl SyncReport {
    /// For a series line: the slow syncs and, when known, the slowest
    /// one's bound (`0, slowest ≤ 50 ms`). A pause of the whole server
    /// can be a sync under the slow bound: at 200 in flight and a median
    /// of 30 ms, one sync of 25 ms held every conversation and put 146
    /// of a run's 161 slowest within one window (docs/performance.md,
    /// 2026-12-07).
    pub fn brief(&self) -> String {
        match self.slowest_at_most_ms {
            Some(ms) => format!("{}, slowest ≤ {ms} ms", self.slow),
            None => self.slow.to_string(),
        }
    }

    /// For the report: `3106 (0 over 50 ms, the slowest at most 50 ms)`.
    pub fn sentence(&self) -> String {
        let slowest = self
            .slowest_at_most_ms
            .map_or_else(String::new, |ms| format!(", the slowest at most {ms} ms"));
        format!(
            "{} ({} over {} ms{slowest})",
            self.syncs,
            self.slow,
            (SLOW_SYNC_SECS * 1e3).round()
        )
    }
}

/// Reads the histogram from the server at `base`; `None` when its
/// metrics are off, unreadable or larger than [`MAX_METRICS_BYTES`].
pub async fn read(http: &reqwest::Client, base: &str) -> Option<SyncHistogram> {
    let mut response = http
        .get(format!("{base}/metrics"))
        .timeout(Duration::from_millis(METRICS_TIMEOUT_MS))
        .send()
        .await
        .ok()?
        .error_for_status()
        .ok()?;
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.ok()? {
        if body.len() + chunk.len() > MAX_METRICS_BYTES {
            return None;
        }
        body.extend_from_slice(&chunk);
    }
    SyncHistogram::parse(std::str::from_utf8(&body).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exposition(counts: [u64; 4]) -> String {
        let [a, b, c, d] = counts;
        format!(
            "# TYPE {LEDGER_FLUSH_SECONDS} histogram\n\
             {LEDGER_FLUSH_SECONDS}_bucket{{le=\"0.01\"}} {a}\n\
             {LEDGER_FLUSH_SECONDS}_bucket{{le=\"0.05\"}} {b}\n\
             {LEDGER_FLUSH_SECONDS}_bucket{{le=\"0.25\"}} {c}\n\
             {LEDGER_FLUSH_SECONDS}_bucket{{le=\"+Inf\"}} {d}\n\
             {LEDGER_FLUSH_SECONDS}_sum 1.5\n\
             {LEDGER_FLUSH_SECONDS}_count {d}\n\
             other_metric_bucket{{le=\"0.1\"}} 99\n"
        )
    }

    #[test]
    fn the_slow_bound_is_one_the_server_publishes() {
        assert!(crate::telemetry::SECONDS_BUCKETS.contains(&SLOW_SYNC_SECS));
    }

    #[test]
    fn a_run_counts_its_own_syncs_and_the_slow_ones() {
        let before = SyncHistogram::parse(&exposition([10, 10, 10, 10])).expect("parsed");
        let after = SyncHistogram::parse(&exposition([100, 107, 109, 109])).expect("parsed");
        assert_eq!(
            before.until(&after),
            Some(SyncReport {
                syncs: 99,
                slow: 2,
                slowest_at_most_ms: Some(250.0),
            })
        );
    }

    #[test]
    fn the_slowest_bound_is_left_out_when_none_or_past_the_largest() {
        let zero = SyncHistogram::parse(&exposition([0, 0, 0, 0])).expect("parsed");
        let none = zero.until(&zero).expect("same bounds");
        assert_eq!(
            (none.syncs, none.slow, none.slowest_at_most_ms),
            (0, 0, None)
        );
        let past = SyncHistogram::parse(&exposition([1, 1, 1, 2])).expect("parsed");
        let report = zero.until(&past).expect("same bounds");
        assert_eq!((report.syncs, report.slow), (2, 1));
        assert_eq!(report.slowest_at_most_ms, None);
        let fast = SyncHistogram::parse(&exposition([3, 3, 3, 3])).expect("parsed");
        assert_eq!(zero.until(&fast).unwrap().slowest_at_most_ms, Some(10.0));
        // A series line gives the slowest's bound where it is known.
        assert_eq!(zero.until(&fast).unwrap().brief(), "0, slowest ≤ 10 ms");
        assert_eq!(report.brief(), "1");
        assert_eq!(report.sentence(), "2 (1 over 50 ms)");
        assert_eq!(
            zero.until(&fast).unwrap().sentence(),
            "3 (0 over 50 ms, the slowest at most 10 ms)"
        );
    }

    #[test]
    fn what_is_not_the_histogram_is_not_read_as_it() {
        assert_eq!(SyncHistogram::parse("other_metric 1\n"), None);
        let broken = format!("{LEDGER_FLUSH_SECONDS}_bucket{{le=\"0.1\"}} many\n");
        assert_eq!(SyncHistogram::parse(&broken), None);
        // Readings with different bounds are not compared.
        let few = SyncHistogram::parse(&format!("{LEDGER_FLUSH_SECONDS}_bucket{{le=\"0.1\"}} 1\n"))
            .expect("parsed");
        let full = SyncHistogram::parse(&exposition([1, 1, 1, 1])).expect("parsed");
        assert_eq!(few.until(&full), None);
    }
}
