//! `GET /healthz` (is the process able to work at all) and `GET /readyz`
//! (should traffic come here now), both from the ledger's own state.
//!
//! Owns: judging the ledger's condition into a status and reasons.
//! Must never: answer `ok` while the ledger refuses writes or the
//! integrity scan found damage, or do I/O beyond reading counters.

use aide::axum::ApiRouter;
use aide::axum::routing::get_with;
use aide::transform::TransformOperation;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::ledger::Ledger;

use crate::lifecycle::Lifecycle;

/// `GET /healthz` and `GET /readyz`, described for the OpenAPI document.
pub fn api() -> ApiRouter<HealthState> {
    ApiRouter::new()
        .api_route(
            "/healthz",
            get_with(healthz, |op| {
                described(
                    op,
                    "healthz",
                    "Liveness: 503 once the ledger refuses writes",
                )
            }),
        )
        .api_route(
            "/readyz",
            get_with(readyz, |op| {
                described(op, "readyz", "Readiness: 503 while anything is wrong")
            }),
        )
}

/// Both routes answer the same body, 200 or 503.
fn described<'t>(op: TransformOperation<'t>, id: &str, summary: &str) -> TransformOperation<'t> {
    let body = crate::api_docs::schema(json!({
        "type": "object",
        "required": ["status", "reasons", "draining", "store", "ledger"],
        "properties": {
            "status": {"enum": ["ok", "degraded", "unavailable"]},
            "reasons": {"type": "array", "items": {"type": "string"}},
            "draining": {"type": "boolean"},
            "store": {"enum": ["intact", "damaged"]},
        },
    }));
    let op = op.id(id).summary(summary).tag("operations");
    let op = crate::api_docs::respond(
        op,
        200,
        "Serving (`ok`, or `degraded` with reasons).",
        Some((crate::api_docs::JSON, body.clone())),
    );
    crate::api_docs::respond(
        op,
        503,
        "Not serving: `unavailable`, with reasons.",
        Some((crate::api_docs::JSON, body)),
    )
}

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
    /// The store cannot be reached now; appends fail as retryable until
    /// it comes back, with no restart needed.
    Unavailable(String),
    /// Streams refused because records of theirs fail their checks.
    Damaged { streams: usize },
    /// The start-up integrity scan is still reading the store.
    Scanning,
    /// The server is shutting down.
    Draining,
}

impl Concern {
    fn sentence(&self) -> String {
        match self {
            Concern::Poisoned(reason) => format!(
                "the ledger refuses writes after a failed flush ({reason}); restart the server"
            ),
            Concern::Unavailable(reason) => format!(
                "the store cannot be reached ({reason}); requests that write are refused as retryable until it is back"
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
    let condition = ledger.condition();
    let mut concerns = Vec::new();
    if let Some(reason) = condition.poisoned {
        concerns.push(Concern::Poisoned(reason));
    }
    if let Some(reason) = condition.unavailable {
        concerns.push(Concern::Unavailable(reason));
    }
    let damaged = condition.damaged.len();
    if damaged > 0 {
        concerns.push(Concern::Damaged { streams: damaged });
    } else if !condition.damage_elsewhere.is_empty() {
        // Problems with no stream to refuse (damage to the store's files).
        concerns.push(Concern::Damaged { streams: 0 });
    }
    if condition.scanning {
        concerns.push(Concern::Scanning);
    }
    if draining {
        concerns.push(Concern::Draining);
    }
    concerns
}

/// Damaged streams the health routes list by name, at most.
pub const MAX_LISTED_DAMAGED_STREAMS: usize = 100;

/// How the store stands: damaged streams by name, damage the scan could
/// not pin on a stream, whether writes are refused, and what to do.
fn store_health(ledger: &Ledger) -> serde_json::Value {
    let condition = ledger.condition();
    let corrupt = condition.damaged;
    let unplaced: Vec<String> = condition
        .damage_elsewhere
        .into_iter()
        .take(MAX_LISTED_DAMAGED_STREAMS)
        .collect();
    let damaged = !corrupt.is_empty() || !unplaced.is_empty();
    let listed: Vec<serde_json::Value> = corrupt
        .iter()
        .take(MAX_LISTED_DAMAGED_STREAMS)
        .map(|(stream, position)| json!({"stream": stream, "position": position}))
        .collect();
    json!({
        "store": if damaged { "damaged" } else { "intact" },
        "engine": ledger.engine(),
        "unavailable": condition.unavailable,
        "integrity_scan_finished": !condition.scanning,
        "corrupt_streams": corrupt.len(),
        "damaged_streams": listed,
        "damage_elsewhere": unplaced,
        "writes_refused": condition.poisoned,
        "action": damaged.then_some(
            "the damaged conversations and threads are refused, the others served; run `ledgerwire log verify` on a copy of the store and restore it from a backup"
        ),
    })
}

/// Answers with every concern as a reason; those `fatal` picks make it 503.
fn answer(state: &HealthState, fatal: impl Fn(&Concern) -> bool) -> Response {
    let concerns = concerns(&state.ledger, state.lifecycle.is_draining());
    let failing = concerns.iter().any(&fatal);
    let status = if failing {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    let word = match (failing, concerns.is_empty()) {
        (true, _) => "unavailable",
        (false, true) => "ok",
        // Served, but not everything is well (a damaged stream is refused
        // on its own): never `ok`.
        (false, false) => "degraded",
    };
    let mut body = store_health(&state.ledger);
    body["status"] = json!(word);
    body["reasons"] = json!(concerns.iter().map(Concern::sentence).collect::<Vec<_>>());
    body["draining"] = json!(state.lifecycle.is_draining());
    body["ledger"] = json!(state.ledger.stats());
    (status, Json(body)).into_response()
}

/// Liveness: 503 when the process cannot work until it restarts (the
/// ledger refuses writes); a damaged store is reported (`degraded`), not
/// fatal, since a restart would not mend it.
pub async fn healthz(State(state): State<HealthState>) -> Response {
    answer(&state, |concern| matches!(concern, Concern::Poisoned(_)))
}

/// Readiness: 503 for any concern: writes refused, damage, the scan still
/// running, or a drain.
pub async fn readyz(State(state): State<HealthState>) -> Response {
    answer(&state, |_| true)
}
