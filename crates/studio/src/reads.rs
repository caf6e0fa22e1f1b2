//! Read-only Studio routes (our extension beyond contract v1): a
//! conversation's canvas as it stands, its timeline, every record of its
//! stream as the log holds it, and the replay check of its segments, for
//! audit views (the web Studio's) and tools.
//!
//! Owns: `GET /api/studio/conversations/{id}/composition`,
//! `GET /api/studio/conversations/{id}/timeline?from=&limit=&raw=` and
//! `GET /api/studio/conversations/{id}/check`.
//! Must never: change anything, or show a conversation to another
//! principal than its own.

use std::sync::Arc;
use std::time::Duration;

use aide::axum::ApiRouter;
use aide::axum::routing::get_with;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::{self, Principal};
use super::conversation::Conversation;
use super::openapi as docs;
use super::records::{self, conversation_stream};
use super::rerun::{CheckOutcome, check_segments};
use super::service::Studio;
use ledgerwire_ledger::record::now_ms;
use ledgerwire_ledger::{Folded, KindRegistry, Record};
use ledgerwire_wire::WireError;
use ledgerwire_wire::error::{ErrorCode, Retry};
use ledgerwire_wire::ids::ConversationId;

/// Records one timeline page holds at most.
pub const MAX_TIMELINE_RECORDS: u64 = 1000;
/// Records a timeline page holds when `limit` is not given.
pub const DEFAULT_TIMELINE_RECORDS: u64 = 200;
/// Records a replay check reads at most; a longer conversation is not
/// checked over HTTP (`ledgerwire replay --check` has no such bound).
pub const MAX_CHECK_RECORDS: usize = 200_000;
/// Longest one replay check may run, in milliseconds.
pub const MAX_CHECK_MS: u64 = 30_000;
/// Replay checks one server runs at once; another is refused until one ends.
pub const CHECKS_AT_ONCE: usize = 2;

static CHECKS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(CHECKS_AT_ONCE);

/// The read routes, each with its description (`studio::openapi`).
pub fn api() -> ApiRouter<Studio> {
    ApiRouter::new()
        .api_route(
            "/api/studio/conversations/{conversation_id}/composition",
            get_with(composition, docs::read_composition),
        )
        .api_route(
            "/api/studio/conversations/{conversation_id}/timeline",
            get_with(timeline, docs::timeline),
        )
        .api_route(
            "/api/studio/conversations/{conversation_id}/check",
            get_with(check, docs::check),
        )
}

fn conversation_id(id: String) -> Result<ConversationId, WireError> {
    ConversationId::new(id).map_err(|error| {
        WireError::binding_invalid(
            "/conversation_id",
            error.to_string(),
            "name a conversation by the id you minted for it",
        )
    })
}

/// The conversation `id` folded, or not found unless `principal` holds it.
async fn held(
    studio: &Studio,
    principal: &Principal,
    id: &ConversationId,
) -> Result<Arc<Folded<Conversation>>, WireError> {
    let folded = studio.conversation(principal, id).await?;
    if !folded.state.exists() {
        return Err(unknown());
    }
    Ok(folded)
}

fn unknown() -> WireError {
    WireError::not_found(
        "/conversation_id",
        "No conversation with this id is held for you.",
    )
}

/// `GET …/composition`: `{conversation_id, composition}` (`null` before
/// the first card).
pub async fn composition(
    State(studio): State<Studio>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let result = async {
        let principal = auth::from_headers(&studio.config().auth, &headers)?;
        let id = conversation_id(id)?;
        let folded = held(&studio, &principal, &id).await?;
        Ok::<_, WireError>(json!({
            "conversation_id": id.as_str(),
            "composition": folded.state.composition,
        }))
    }
    .await;
    match result {
        Ok(body) => Json(body).into_response(),
        Err(error) => error.into_response(),
    }
}

/// The page a timeline request asks for.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "TimelinePage")]
pub struct Page {
    #[serde(default)]
    from: u64,
    /// Records in the page (200 when absent).
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_TIMELINE_RECORDS))]
    limit: Option<u64>,
    /// Keep JSON-text members (frames, requests, answers) as the exact
    /// text the log holds, byte for byte as a client received it, instead
    /// of parsing them.
    #[serde(default)]
    raw: bool,
}

/// `GET …/timeline`: `{conversation_id, head, records, next}`, where
/// `next` is the position to ask from for the following page (`null` at
/// the end). Each record is `{position, timestamp_ms, kind, payload}`,
/// its JSON-text members (frames, requests, answers) parsed.
pub async fn timeline(
    State(studio): State<Studio>,
    Path(id): Path<String>,
    query: Result<Query<Page>, axum::extract::rejection::QueryRejection>,
    headers: HeaderMap,
) -> Response {
    let result = async {
        let principal = auth::from_headers(&studio.config().auth, &headers)?;
        let Query(page) = query.map_err(|error| {
            WireError::malformed(
                None,
                format!("The query is not a timeline page: {error}."),
                "ask ?from=<position>&limit=<1 to 1000>&raw=<true|false>",
            )
        })?;
        let limit = page.limit.unwrap_or(DEFAULT_TIMELINE_RECORDS);
        if limit == 0 || limit > MAX_TIMELINE_RECORDS {
            return Err(WireError::binding_invalid(
                "/limit",
                format!("limit is {limit}; a page holds 1 to {MAX_TIMELINE_RECORDS} records"),
                format!("ask for at most {MAX_TIMELINE_RECORDS} records a page"),
            ));
        }
        let id = conversation_id(id)?;
        held(&studio, &principal, &id).await?;
        let stream = conversation_stream(&principal, &id).map_err(|_| unknown())?;
        let ledger = studio.ledger();
        let failed = |error: ledgerwire_ledger::LedgerError| {
            tracing::error!(%error, "a timeline read failed");
            WireError::transient(5, "The conversation's records could not be read; retry.")
        };
        let head = ledger.head(&stream).await.map_err(failed)?;
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let records = ledger
            .read_page(&stream, page.from, limit)
            .await
            .map_err(failed)?;
        let next = records
            .last()
            .map(|r| r.position() + 1)
            .filter(|next| *next < head);
        Ok(json!({
            "conversation_id": id.as_str(),
            "head": head,
            "records": records.iter().map(|r| timeline_record(r, page.raw)).collect::<Vec<_>>(),
            "next": next,
        }))
    }
    .await;
    match result {
        Ok(body) => Json(body).into_response(),
        Err(error) => error.into_response(),
    }
}

fn timeline_record(record: &Record, raw: bool) -> Value {
    // A conversation's stream holds the Studio's kinds only.
    static KINDS: std::sync::LazyLock<KindRegistry> =
        std::sync::LazyLock::new(|| KindRegistry::default().with(records::KINDS));
    let kind = KINDS.name(record.kind()).unwrap_or("unknown");
    // JSON text members (frames, requests, answers) arrive parsed, or as
    // the exact text the log holds with `raw`.
    let payload = if raw {
        KINDS.payload_json_as_stored(record)
    } else {
        KINDS.payload_json(record)
    }
    .unwrap_or(Value::Null);
    json!({
        "position": record.position(),
        "timestamp_ms": record.timestamp_ms(),
        "kind": kind,
        "payload": payload,
    })
}

/// `GET …/check`: every recorded segment run through the server's agent
/// again and compared with what was sent (as `ledgerwire replay --check`
/// does): `{conversation_id, segments: [{segment, turn, agent_frames,
/// verdict, live, differs?}], same, differ, skipped}`. `verdict` is
/// `same`, `differs` (with the first differing agent frame, recorded and
/// now) or `skipped` (the server, not the agent, chose the segment's
/// frames); `live` marks the segment still streaming, compared as far as
/// it got.
pub async fn check(
    State(studio): State<Studio>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let result = async {
        let principal = auth::from_headers(&studio.config().auth, &headers)?;
        let id = conversation_id(id)?;
        let folded = held(&studio, &principal, &id).await?;
        let live = folded
            .state
            .live_lease(now_ms())
            .map(|(lease, _)| lease.segment);
        drop(folded);
        let Ok(_permit) = CHECKS.try_acquire() else {
            return Err(WireError::transient(
                1,
                "Other replay checks are running on this server; retry in a moment.",
            ));
        };
        let stream = conversation_stream(&principal, &id).map_err(|_| unknown())?;
        let failed = |error: ledgerwire_ledger::LedgerError| {
            tracing::error!(%error, "a replay check's read failed");
            WireError::transient(5, "The conversation's records could not be read; retry.")
        };
        let records = studio
            .ledger()
            .read_page(&stream, 0, MAX_CHECK_RECORDS + 1)
            .await
            .map_err(failed)?;
        if records.len() > MAX_CHECK_RECORDS {
            return Err(WireError {
                code: ErrorCode::CapabilityUnavailable,
                retry: Retry::DoNotRetry,
                detail: format!(
                    "The conversation holds more than {MAX_CHECK_RECORDS} records; check it with `ledgerwire replay --check`."
                ),
                pointer: None,
            });
        }
        let agent = studio.inner.agent.clone();
        let checks = tokio::time::timeout(
            Duration::from_millis(MAX_CHECK_MS),
            check_segments(records, agent.as_ref()),
        )
        .await
        .map_err(|_| {
            WireError::transient(
                5,
                "The replay check took too long; retry, or use `ledgerwire replay --check`.",
            )
        })?
        .map_err(|error| {
            tracing::error!(%error, "a conversation did not fold for its replay check");
            WireError::transient(
                3600,
                "This conversation's record does not fold and cannot be checked; an operator must restore it.",
            )
        })?;
        let count = |wanted: fn(&CheckOutcome) -> bool| {
            checks.iter().filter(|c| wanted(&c.outcome)).count()
        };
        let segments: Vec<Value> = checks
            .iter()
            .map(|check| {
                let mut entry = json!({
                    "segment": check.segment,
                    "turn": check.turn,
                    "agent_frames": check.recorded,
                    "live": live == Some(check.segment),
                });
                let verdict = match &check.outcome {
                    CheckOutcome::Same => "same",
                    CheckOutcome::Skipped => "skipped",
                    CheckOutcome::Differs {
                        index,
                        recorded,
                        now,
                    } => {
                        entry["differs"] =
                            json!({"index": index, "recorded": recorded, "now": now});
                        "differs"
                    }
                };
                entry["verdict"] = json!(verdict);
                entry
            })
            .collect();
        Ok(json!({
            "conversation_id": id.as_str(),
            "segments": segments,
            "same": count(|o| matches!(o, CheckOutcome::Same)),
            "differ": count(|o| matches!(o, CheckOutcome::Differs { .. })),
            "skipped": count(|o| matches!(o, CheckOutcome::Skipped)),
        }))
    };
    match result.await {
        Ok(body) => Json(body).into_response(),
        Err(error) => error.into_response(),
    }
}
