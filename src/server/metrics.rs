//! `GET /metrics`: the process's metrics in the Prometheus text format,
//! with gauges of the ledger's own state sampled at the scrape, or a 404
//! saying metrics are off.
//!
//! Owns: that route and its description. Must never: record a metric
//! (`telemetry` names them and the layers record them).

use aide::axum::ApiRouter;
use aide::axum::routing::get_with;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::PrometheusHandle;

use crate::ledger::Ledger;
use crate::wire::WireError;

/// The Prometheus text format's media type.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What `/metrics` reads: the recorder (`None`: metrics are off) and the
/// ledger its gauges sample.
#[derive(Clone)]
pub struct Scrape {
    handle: Option<PrometheusHandle>,
    ledger: Ledger,
}

impl Scrape {
    /// Installs the process's recorder when `enabled`.
    pub fn new(enabled: bool, ledger: Ledger) -> Self {
        let handle = enabled.then(crate::telemetry::install).flatten();
        Self { handle, ledger }
    }
}

/// The route, described for the OpenAPI document.
pub fn api() -> ApiRouter<Scrape> {
    ApiRouter::new().api_route(
        "/metrics",
        get_with(metrics, |op| {
            let op = op
                .id("metrics")
                .summary("Metrics in the Prometheus text format")
                .tag("operations");
            let text = crate::api_docs::schema(serde_json::json!({"type": "string"}));
            let op = crate::api_docs::respond(
                op,
                200,
                "Every metric docs/operating.md lists.",
                Some((PROMETHEUS_TEXT, text)),
            );
            crate::api_docs::json::<WireError>(op, 404, "`not_found`: metrics are off.")
        }),
    )
}

async fn metrics(State(scrape): State<Scrape>) -> Response {
    let Some(handle) = &scrape.handle else {
        return WireError::not_found("", "Metrics are off in this server.").into_response();
    };
    if let Some(&unindexed) = scrape.ledger.stats().engine.get("records_unindexed") {
        metrics::gauge!(crate::telemetry::LEDGER_RECORDS_UNINDEXED).set(unindexed as f64);
    }
    ([(header::CONTENT_TYPE, PROMETHEUS_TEXT)], handle.render()).into_response()
}
