//! Process metrics: every metric's name, type and meaning in one table,
//! the Prometheus recorder behind `GET /metrics`, and a guard for gauges
//! of things that are open (streams, attaches, segments).
//!
//! Metrics go through the `metrics` facade, so the ledger and the doors
//! record them without knowing who exports them; with no recorder
//! installed (a library user, a benchmark's baseline) every call is a
//! no-op. Must never: label a metric with anything a client controls
//! beyond a bounded vocabulary (a route pattern, a status, a fixed
//! outcome name): never an id, a token or a path.
//! Owns: the metric names and the recorder.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// The kinds of metric Prometheus knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricType {
    Counter,
    Gauge,
    Histogram,
}

/// One metric this server exports.
#[derive(Clone, Copy, Debug)]
pub struct MetricSpec {
    pub name: &'static str,
    pub kind: MetricType,
    /// Its labels, for the documentation.
    pub labels: &'static str,
    pub help: &'static str,
}

pub const LEDGER_APPENDS: &str = "ledgerwire_ledger_appends_total";
pub const LEDGER_APPEND_SECONDS: &str = "ledgerwire_ledger_append_seconds";
pub const LEDGER_RECORDS: &str = "ledgerwire_ledger_records_appended_total";
pub const LEDGER_BYTES: &str = "ledgerwire_ledger_bytes_appended_total";
pub const LEDGER_FLUSHES: &str = "ledgerwire_ledger_flushes_total";
pub const LEDGER_FLUSH_SECONDS: &str = "ledgerwire_ledger_flush_seconds";
pub const LEDGER_GROUP_COMMIT: &str = "ledgerwire_ledger_group_commit_size";
pub const LEDGER_RECORDS_UNINDEXED: &str = "ledgerwire_ledger_records_unindexed";
pub const FOLD_CACHE: &str = "ledgerwire_fold_cache_lookups_total";
pub const STUDIO_SEGMENTS_LIVE: &str = "ledgerwire_studio_segments_live";
pub const STUDIO_SEGMENTS_ENDED: &str = "ledgerwire_studio_segments_ended_total";
pub const STUDIO_SSE_OPEN: &str = "ledgerwire_studio_sse_streams_open";
pub const STUDIO_LEASE_CONFLICTS: &str = "ledgerwire_studio_lease_conflicts_total";
pub const STATEWIRE_ATTACHES_OPEN: &str = "ledgerwire_statewire_attaches_open";
pub const STATEWIRE_ADMISSIONS: &str = "ledgerwire_statewire_admissions_total";
pub const HTTP_REQUESTS: &str = "ledgerwire_http_requests_total";
pub const HTTP_REQUEST_SECONDS: &str = "ledgerwire_http_request_seconds";
pub const DRAINS: &str = "ledgerwire_drain_streams_total";

/// Every metric, as `docs/operating.md` lists them.
pub const METRICS: &[MetricSpec] = &[
    MetricSpec {
        name: LEDGER_APPENDS,
        kind: MetricType::Counter,
        labels: "durability (durable, buffered), outcome (ok, conflict, error)",
        help: "Appends submitted to the ledger, by how they ended.",
    },
    MetricSpec {
        name: LEDGER_APPEND_SECONDS,
        kind: MetricType::Histogram,
        labels: "durability",
        help: "Time from submitting an append to its acknowledgement (for a durable one: on disk).",
    },
    MetricSpec {
        name: LEDGER_RECORDS,
        kind: MetricType::Counter,
        labels: "",
        help: "Records written to the log.",
    },
    MetricSpec {
        name: LEDGER_BYTES,
        kind: MetricType::Counter,
        labels: "",
        help: "Bytes of record envelopes written to the log.",
    },
    MetricSpec {
        name: LEDGER_FLUSHES,
        kind: MetricType::Counter,
        labels: "",
        help: "Group commits: flushes that made waiting durable appends durable.",
    },
    MetricSpec {
        name: LEDGER_FLUSH_SECONDS,
        kind: MetricType::Histogram,
        labels: "",
        help: "Duration of one group commit's flush.",
    },
    MetricSpec {
        name: LEDGER_GROUP_COMMIT,
        kind: MetricType::Histogram,
        labels: "",
        help: "Durable appends (and flush requests) acknowledged by one flush.",
    },
    MetricSpec {
        name: LEDGER_RECORDS_UNINDEXED,
        kind: MetricType::Gauge,
        labels: "",
        help: "Records journaled that the indexer has not applied to sled yet (read from memory until then), as of the scrape.",
    },
    MetricSpec {
        name: FOLD_CACHE,
        kind: MetricType::Counter,
        labels: "fold (the fold's name), result (hit, miss)",
        help: "Lookups of folded stream state in memory; a miss folds from a snapshot or the start.",
    },
    MetricSpec {
        name: STUDIO_SEGMENTS_LIVE,
        kind: MetricType::Gauge,
        labels: "",
        help: "Studio segments holding a lease right now.",
    },
    MetricSpec {
        name: STUDIO_SEGMENTS_ENDED,
        kind: MetricType::Counter,
        labels: "end (paused, done, failed, disconnected)",
        help: "Studio segments that released their lease, by how they ended.",
    },
    MetricSpec {
        name: STUDIO_SSE_OPEN,
        kind: MetricType::Gauge,
        labels: "",
        help: "Studio SSE responses open right now.",
    },
    MetricSpec {
        name: STUDIO_LEASE_CONFLICTS,
        kind: MetricType::Counter,
        labels: "",
        help: "Studio requests refused with 409 because a live segment holds the conversation.",
    },
    MetricSpec {
        name: STATEWIRE_ATTACHES_OPEN,
        kind: MetricType::Gauge,
        labels: "",
        help: "Statewire attaches open right now.",
    },
    MetricSpec {
        name: STATEWIRE_ADMISSIONS,
        kind: MetricType::Counter,
        labels: "outcome (admitted, duplicate, refused)",
        help: "Statewire commands submitted on durable lanes, by what admission did with them.",
    },
    MetricSpec {
        name: HTTP_REQUESTS,
        kind: MetricType::Counter,
        labels: "method, route (the route's pattern, or `unmatched`), status",
        help: "HTTP requests answered, counted when the response head is sent.",
    },
    MetricSpec {
        name: HTTP_REQUEST_SECONDS,
        kind: MetricType::Histogram,
        labels: "route",
        help: "Time to the response head (a stream's own length is not included).",
    },
    MetricSpec {
        name: DRAINS,
        kind: MetricType::Counter,
        labels: "outcome (finished, cut)",
        help: "Streams open at shutdown: finished on their own within the drain timeout, or cut when it ran out.",
    },
];

/// Histogram buckets of durations, in seconds (100 µs to 5 s).
pub const SECONDS_BUCKETS: &[f64] = &[
    0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

/// Histogram buckets of group-commit sizes.
const GROUP_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 1024.0];

static RECORDER: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the process's Prometheus recorder (once; later calls return
/// the same handle) and describes every metric. `None` if another
/// recorder was installed first by the embedding program.
pub fn install() -> Option<PrometheusHandle> {
    RECORDER.get_or_init(build_and_install).clone()
}

/// Whether this process's recorder is the one [`install`] put in place.
fn installed() -> bool {
    matches!(RECORDER.get(), Some(Some(_)))
}

/// Metric handles registered once and kept, for metrics recorded on a
/// hot path: registering builds the metric's key and looks it up in the
/// recorder, which the `metrics` macros do on every call. Kept only once
/// [`install`] has put the recorder in place (a handle registered before
/// would stay a no-op); until then, or under another program's recorder,
/// the handles are registered on each use, as the macros would.
pub struct Kept<T>(OnceLock<T>);

impl<T> Kept<T> {
    pub const fn new() -> Self {
        Self(OnceLock::new())
    }

    /// Runs `record` with the handles `register` makes.
    pub fn with<R>(&self, register: impl Fn() -> T, record: impl FnOnce(&T) -> R) -> R {
        if let Some(kept) = self.0.get() {
            return record(kept);
        }
        if installed() {
            return record(self.0.get_or_init(register));
        }
        record(&register())
    }
}

impl<T> Default for Kept<T> {
    fn default() -> Self {
        Self::new()
    }
}

fn build_and_install() -> Option<PrometheusHandle> {
    let group = metrics_exporter_prometheus::Matcher::Full(LEDGER_GROUP_COMMIT.to_owned());
    let builder = PrometheusBuilder::new()
        .set_buckets(SECONDS_BUCKETS)
        .and_then(|builder| builder.set_buckets_for_metric(group, GROUP_BUCKETS));
    let handle = match builder.map(PrometheusBuilder::install_recorder) {
        Ok(Ok(handle)) => handle,
        Ok(Err(error)) | Err(error) => {
            tracing::warn!(%error, "metrics recorder not installed; /metrics stays empty");
            return None;
        }
    };
    spawn_upkeep(handle.clone());
    for spec in METRICS {
        match spec.kind {
            MetricType::Counter => metrics::describe_counter!(spec.name, spec.help),
            MetricType::Gauge => metrics::describe_gauge!(spec.name, spec.help),
            MetricType::Histogram => metrics::describe_histogram!(spec.name, spec.help),
        }
    }
    Some(handle)
}

/// How often the recorder folds the histogram samples it holds into
/// their buckets, in milliseconds. The recorder keeps every sample until
/// then (or until `/metrics` is read), so without this a server nobody
/// scrapes would grow by a few bytes an append, forever.
pub const METRICS_UPKEEP_INTERVAL_MS: u64 = 5_000;

/// Runs the recorder's upkeep on a thread of its own, for the life of the
/// process (the recorder is installed once and never removed).
fn spawn_upkeep(handle: PrometheusHandle) {
    let spawned = std::thread::Builder::new()
        .name("metrics-upkeep".into())
        .spawn(move || {
            loop {
                std::thread::sleep(std::time::Duration::from_millis(METRICS_UPKEEP_INTERVAL_MS));
                handle.run_upkeep();
            }
        });
    if let Err(error) = spawned {
        tracing::warn!(%error, "metrics upkeep not started: histograms are folded only when /metrics is read");
    }
}

/// Names the conversation (or Statewire thread) a request concerns in its
/// request-log span (the server's request log opens that span).
pub fn note_conversation(id: &str) {
    tracing::Span::current().record("conversation", id);
}

/// Raises a gauge while it lives: one open stream, attach or segment.
#[must_use = "the gauge falls again when the guard is dropped"]
pub struct Open {
    gauge: metrics::Gauge,
}

impl Open {
    pub fn new(gauge: metrics::Gauge) -> Self {
        gauge.increment(1.0);
        Self { gauge }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.gauge.decrement(1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_prefixed() {
        let mut names: Vec<_> = METRICS.iter().map(|spec| spec.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), METRICS.len());
        assert!(names.iter().all(|name| name.starts_with("ledgerwire_")));
        for spec in METRICS {
            let counter_suffix = spec.name.ends_with("_total");
            assert_eq!(
                counter_suffix,
                spec.kind == MetricType::Counter,
                "{}",
                spec.name
            );
        }
    }

    #[test]
    fn every_metric_is_documented() {
        let doc = include_str!("../../../docs/operating.md");
        for spec in METRICS {
            assert!(
                doc.contains(spec.name),
                "docs/operating.md lacks {}",
                spec.name
            );
        }
    }
}
