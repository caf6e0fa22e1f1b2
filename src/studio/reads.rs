//! Read-only Studio routes (our extension beyond contract v1): a
//! conversation's canvas as it stands, and its timeline, every record of
//! its stream as the log holds it, for audit views and tools.
//!
//! Owns: `GET /api/studio/conversations/{id}/composition` and
//! `GET /api/studio/conversations/{id}/timeline?from=&limit=`.
//! Must never: change anything, or show a conversation to another
//! principal than its own.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::records::conversation_stream;
use super::routes::authenticate;
use super::service::Studio;
use super::wire::WireError;
use super::wire::ids::ConversationId;
use crate::ledger::{Record, RecordKind, kinds};

/// Records one timeline page holds at most.
pub const MAX_TIMELINE_RECORDS: u64 = 1000;
/// Records a timeline page holds when `limit` is not given.
pub const DEFAULT_TIMELINE_RECORDS: u64 = 200;

fn conversation_id(id: String) -> Result<ConversationId, WireError> {
    ConversationId::new(id).map_err(|error| {
        WireError::binding_invalid(
            "/conversation_id",
            error.to_string(),
            "name a conversation by the id you minted for it",
        )
    })
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
    let result = (|| {
        let principal = authenticate(&studio, &headers)?;
        let id = conversation_id(id)?;
        let folded = studio.conversation(&principal, &id)?;
        if !folded.state.exists() {
            return Err(unknown());
        }
        Ok(json!({
            "conversation_id": id.as_str(),
            "composition": folded.state.composition,
        }))
    })();
    match result {
        Ok(body) => Json(body).into_response(),
        Err(error) => error.into_response(),
    }
}

/// The page a timeline request asks for.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Page {
    #[serde(default)]
    from: u64,
    #[serde(default)]
    limit: Option<u64>,
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
    let result = (|| {
        let principal = authenticate(&studio, &headers)?;
        let Query(page) = query.map_err(|error| {
            WireError::malformed(
                None,
                format!("The query is not a timeline page: {error}."),
                "ask ?from=<position>&limit=<1 to 1000>",
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
        if !studio.conversation(&principal, &id)?.state.exists() {
            return Err(unknown());
        }
        let stream = conversation_stream(&principal, &id).map_err(|_| unknown())?;
        let ledger = studio.ledger();
        let failed = |error: crate::ledger::LedgerError| {
            tracing::error!(%error, "a timeline read failed");
            WireError::transient(5, "The conversation's records could not be read; retry.")
        };
        let head = ledger.head(&stream).map_err(failed)?;
        let records = ledger
            .read(&stream, page.from)
            .map_err(failed)?
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .collect::<Result<Vec<Record>, _>>()
            .map_err(failed)?;
        let next = records
            .last()
            .map(|r| r.position() + 1)
            .filter(|next| *next < head);
        Ok(json!({
            "conversation_id": id.as_str(),
            "head": head,
            "records": records.iter().map(timeline_record).collect::<Vec<_>>(),
            "next": next,
        }))
    })();
    match result {
        Ok(body) => Json(body).into_response(),
        Err(error) => error.into_response(),
    }
}

fn timeline_record(record: &Record) -> Value {
    let kind = RecordKind::from_code(record.kind()).map_or("unknown", RecordKind::name);
    // JSON text members (frames, requests, answers) arrive parsed.
    let payload = kinds::payload_json(record).unwrap_or(Value::Null);
    json!({
        "position": record.position(),
        "timestamp_ms": record.timestamp_ms(),
        "kind": kind,
        "payload": payload,
    })
}
