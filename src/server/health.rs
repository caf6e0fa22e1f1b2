//! `GET /healthz` (is the process able to work at all) and `GET /readyz`
//! (should traffic come here now), both from the ledger's own state.
//!
//! Owns: judging the ledger's condition into a status and reasons.
//! Must never: answer `ok` while the ledger refuses writes or the
//! integrity scan found damage, or do I/O beyond reading counters.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::ledger::Ledger;

use crate::lifecycle::Lifecycle;

/// What the health routes read.
#[derive(Clone)]
pub struct HealthState {
    pub ledger: Ledger,
    pub lifecycle: Lifecycle,
}

/// Why the server is not fit to serve (liveness) or not ready for new
/// traffic (readiness).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Concern {
    /// A flush or batch failed: the ledger refuses every write until a restart.
    Poisoned(String),
    /// Streams refused because records of theirs fail their checks.
    Damaged { streams: usize },
    /// The start-up integrity scan is still reading the store.
    Scanning,
    /// The server is shutting down.
    Draining,
}

impl Concern {
    /// Whether the concern means the process itself is unfit (liveness),
    /// rather than only not ready for new traffic.
    fn fails_liveness(&self) -> bool {
        matches!(self, Concern::Poisoned(_) | Concern::Damaged { .. })
    }

    fn sentence(&self) -> String {
        match self {
            Concern::Poisoned(reason) => format!(
                "the ledger refuses writes after a failed flush ({reason}); restart the server"
            ),
            Concern::Damaged { streams } => format!(
                "the store is damaged: {streams} stream(s) fail their checks and are refused; run `ledgerwire log verify` and restore from a backup"
            ),
            Concern::Scanning => "the integrity scan of the store is still running".to_owned(),
            Concern::Draining => "the server is shutting down".to_owned(),
        }
    }
}

/// Everything wrong with the ledger and the process right now.
pub fn concerns(ledger: &Ledger, draining: bool) -> Vec<Concern> {
    let mut concerns = Vec::new();
    if let Some(reason) = ledger.poisoned() {
        concerns.push(Concern::Poisoned(reason));
    }
    let damaged = ledger.corrupt_streams().len();
    if damaged > 0 {
        concerns.push(Concern::Damaged { streams: damaged });
    }
    match ledger.scrub_report() {
        None => concerns.push(Concern::Scanning),
        Some(report) if !report.is_clean() && damaged == 0 => {
            // Problems with no stream to refuse (sled-level damage).
            concerns.push(Concern::Damaged { streams: 0 });
        }
        Some(_) => {}
    }
    if draining {
        concerns.push(Concern::Draining);
    }
    concerns
}

fn answer(state: &HealthState, counts: impl Fn(&Concern) -> bool) -> Response {
    let concerns = concerns(&state.ledger, state.lifecycle.is_draining());
    let failing: Vec<String> = concerns
        .iter()
        .filter(|c| counts(c))
        .map(Concern::sentence)
        .collect();
    let status = if failing.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = json!({
        "status": if failing.is_empty() { "ok" } else { "unavailable" },
        "reasons": failing,
        "integrity_scan_finished": state.ledger.scrub_report().is_some(),
        "corrupt_streams": state.ledger.corrupt_streams().len(),
        "draining": state.lifecycle.is_draining(),
        "ledger": state.ledger.stats(),
    });
    (status, Json(body)).into_response()
}

/// Liveness: 503 when the ledger cannot work (poisoned or damaged).
pub async fn healthz(State(state): State<HealthState>) -> Response {
    answer(&state, Concern::fails_liveness)
}

/// Readiness: 503 also while the integrity scan runs and while draining.
pub async fn readyz(State(state): State<HealthState>) -> Response {
    answer(&state, |_| true)
}
