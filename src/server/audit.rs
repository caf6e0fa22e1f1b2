//! The live audit API under `/api/admin/`: read-only views of the running
//! server's log for an operator holding `LEDGERWIRE_ADMIN_TOKEN`.
//!
//! Owns: the operator token check, listing streams and conversations,
//! and serving what `ledgerwire log …` and `replay` print, produced by
//! the same functions (so `--url` prints exactly what the offline
//! command prints on the same store).
//! Must never: write to the ledger, answer without the operator token, or
//! show a bearer token (stream keys hold principal digests only).

use std::sync::Arc;

use aide::axum::ApiRouter;
use aide::axum::routing::get_with;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use subtle::ConstantTimeEq;

use crate::agent::Agent;
use futures_util::StreamExt;

use crate::ledger::{Ledger, LedgerError, Record, StreamKey};
use crate::log_commands::{self, ToolError};
use crate::wire::WireError;
use crate::wire::error::{ErrorCode, Retry};

pub use super::audit_answers::{EXIT_CODE_HEADER, FAILURE_HEADER, Integrity, RefusedStream};

/// Most streams or conversations one listing page holds.
pub const MAX_LIST_PAGE: usize = 1_000;

/// Bytes gathered into one chunk of a dump.
const DUMP_CHUNK_BYTES: usize = 64 * 1024;

/// What the audit routes read: the ledger, the agent a replay check
/// runs, and the operator token (`None`: the API is off, and every route
/// says how to turn it on).
#[derive(Clone)]
pub struct Audit {
    ledger: Ledger,
    agent: Arc<dyn Agent>,
    token: Option<Arc<str>>,
}

impl Audit {
    pub fn new(ledger: Ledger, agent: Arc<dyn Agent>, token: Option<String>) -> Self {
        Self {
            ledger,
            agent,
            token: token.map(Into::into),
        }
    }
}

/// The audit routes, each with its description for the OpenAPI document
/// (`server::audit_docs`).
pub fn api() -> ApiRouter<Audit> {
    use super::audit_docs as docs;
    ApiRouter::new()
        .api_route("/api/admin/streams", get_with(streams, docs::streams))
        .api_route(
            "/api/admin/conversations",
            get_with(conversations, docs::conversations),
        )
        .api_route("/api/admin/integrity", get_with(integrity, docs::integrity))
        .api_route("/api/admin/log/dump", get_with(dump, docs::dump))
        .api_route("/api/admin/log/stats", get_with(stats, docs::stats))
        .api_route("/api/admin/log/verify", get_with(verify, docs::verify))
        .api_route("/api/admin/replay", get_with(replay, docs::replay))
        .api_route(
            "/api/admin/replay/check",
            get_with(replay_check, docs::replay_check),
        )
}

/// The audit routes over `audit`.
pub fn router(audit: Audit) -> Router {
    api().with_state(audit).into()
}

/// The answer of every route while no operator token is set.
fn off() -> WireError {
    WireError::not_found(
        "",
        format!(
            "The audit API is off; start the server with {} set to turn it on.",
            super::settings::ADMIN_TOKEN_ENV
        ),
    )
}

/// A query the route cannot read, in the error grammar.
fn bad_query(rejection: QueryRejection) -> WireError {
    WireError::malformed(
        None,
        format!(
            "The query is not one this route reads: {}.",
            rejection.body_text()
        ),
        "pass only the documented query parameters",
    )
}

/// The operator check, then the query.
fn admitted<T>(
    audit: &Audit,
    headers: &HeaderMap,
    query: Result<Query<T>, QueryRejection>,
) -> Result<T, WireError> {
    check_operator(audit, headers)?;
    query.map(|Query(query)| query).map_err(bad_query)
}

fn check_operator(audit: &Audit, headers: &HeaderMap) -> Result<(), WireError> {
    let Some(token) = &audit.token else {
        return Err(off());
    };
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| {
            let (scheme, token) = value.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        });
    let Some(presented) = presented else {
        return Err(unauthorized(Retry::CorrectAndRetry {
            fix: "send `Authorization: Bearer <the operator token>`".to_owned(),
        }));
    };
    if bool::from(presented.as_bytes().ct_eq(token.as_bytes())) {
        Ok(())
    } else {
        Err(unauthorized(Retry::DoNotRetry))
    }
}

fn unauthorized(retry: Retry) -> WireError {
    WireError {
        code: ErrorCode::Unauthorized,
        retry,
        detail: "The audit API needs the operator token (not a Studio token).".to_owned(),
        pointer: None,
    }
}

/// A tool's failure in the error grammar, its sentence unchanged (the
/// `--url` client prints it as the offline command would).
fn tool_error(error: ToolError) -> WireError {
    let (code, retry) = match &error {
        ToolError::NotFound(_) => (ErrorCode::NotFound, Retry::DoNotRetry),
        ToolError::Ambiguous(_) => (
            ErrorCode::BindingInvalid,
            Retry::CorrectAndRetry {
                fix: "pass principal=<digest>".to_owned(),
            },
        ),
        ToolError::Ledger(LedgerError::InvalidStreamKey { .. }) => (
            ErrorCode::BindingInvalid,
            Retry::CorrectAndRetry {
                fix: "pass a stream key as `log stats` and /api/admin/streams list them".to_owned(),
            },
        ),
        _ => (
            ErrorCode::TransientUnavailable,
            Retry::RetryAfterDelay {
                retry_after_seconds: 1,
            },
        ),
    };
    WireError {
        code,
        retry,
        detail: error.to_string(),
        pointer: None,
    }
}

/// A command's printed output with the exit code it implies.
fn printed(text: Vec<u8>, outcome: Result<(), ToolError>) -> Response {
    let failure = match outcome {
        Ok(()) => None,
        Err(error @ (ToolError::Problems(_) | ToolError::Differs(_))) => Some(error.to_string()),
        Err(error) => return tool_error(error).into_response(),
    };
    let mut response = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        text,
    )
        .into_response();
    let headers = response.headers_mut();
    let exit = if failure.is_some() { "1" } else { "0" };
    headers.insert(EXIT_CODE_HEADER, header::HeaderValue::from_static(exit));
    if let Some(sentence) = failure
        && let Ok(value) = header::HeaderValue::from_str(&sentence)
    {
        headers.insert(FAILURE_HEADER, value);
    }
    response
}

/// A page of a listing: the entries after the stream `after`, at most
/// `limit` of them.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "ListingPage")]
pub struct Page {
    after: Option<String>,
    limit: Option<usize>,
}

/// One stream as a listing shows it.
async fn stream_entry(ledger: &Ledger, stream: &StreamKey) -> Result<Value, LedgerError> {
    let records = ledger.head(stream).await?;
    let last_activity_ms = match records {
        0 => None,
        head => ledger
            .read_page(stream, head - 1, 1)
            .await?
            .first()
            .map(Record::timestamp_ms),
    };
    let key = stream.as_str();
    let (door, principal, id) = describe_key(key);
    Ok(json!({
        "stream": key,
        "door": door,
        "principal": principal,
        "id": id,
        "records": records,
        "last_activity_ms": last_activity_ms,
    }))
}

/// Which door a stream belongs to, and its principal digest and id.
fn describe_key(key: &str) -> (&str, Option<&str>, &str) {
    if let Some(rest) = key.strip_prefix("studio/")
        && let Some((principal, id)) = rest.split_once('/')
    {
        return ("studio", Some(principal), id);
    }
    if let Some(rest) = key.strip_prefix("statewire/") {
        if let Some(scoped) = rest.strip_prefix('@')
            && let Some((principal, id)) = scoped.split_once('/')
        {
            return ("statewire", Some(principal), id);
        }
        return ("statewire", None, rest);
    }
    match key.split_once('/') {
        Some((door, id)) => (door, None, id),
        None => ("other", None, key),
    }
}

/// A page of streams (those `keep` accepts), in store order.
async fn list(
    ledger: &Ledger,
    page: &Page,
    keep: impl Fn(&StreamKey) -> bool,
) -> Result<Value, LedgerError> {
    let limit = page.limit.unwrap_or(MAX_LIST_PAGE).clamp(1, MAX_LIST_PAGE);
    let mut streams = std::pin::pin!(ledger.streams());
    if let Some(after) = &page.after {
        while let Some(stream) = streams.next().await {
            if stream?.as_str() == after {
                break;
            }
        }
    }
    let mut entries = Vec::new();
    let mut next = None;
    while let Some(stream) = streams.next().await {
        let stream = stream?;
        if !keep(&stream) {
            continue;
        }
        if entries.len() == limit {
            next = entries
                .last()
                .and_then(|entry: &Value| entry["stream"].as_str().map(str::to_owned));
            break;
        }
        entries.push(stream_entry(ledger, &stream).await?);
    }
    Ok(json!({ "entries": entries, "next": next }))
}

async fn listing(
    audit: Audit,
    headers: HeaderMap,
    page: Result<Query<Page>, QueryRejection>,
    keep: fn(&StreamKey) -> bool,
) -> Response {
    let result = async {
        let page = admitted(&audit, &headers, page)?;
        list(&audit.ledger, &page, keep)
            .await
            .map_err(|error| tool_error(error.into()))
    };
    match result.await {
        Ok(body) => axum::Json(body).into_response(),
        Err(error) => error.into_response(),
    }
}

/// `GET /api/admin/streams`: every stream with its record count and last
/// activity.
async fn streams(
    State(audit): State<Audit>,
    headers: HeaderMap,
    page: Result<Query<Page>, QueryRejection>,
) -> Response {
    listing(audit, headers, page, |_| true).await
}

/// `GET /api/admin/conversations`: the Studio's conversations only.
async fn conversations(
    State(audit): State<Audit>,
    headers: HeaderMap,
    page: Result<Query<Page>, QueryRejection>,
) -> Response {
    listing(audit, headers, page, |s| s.as_str().starts_with("studio/")).await
}

/// `GET /api/admin/integrity`: the start-up scan's report, the streams
/// refused since, and whether the ledger still accepts writes.
async fn integrity(State(audit): State<Audit>, headers: HeaderMap) -> Response {
    if let Err(error) = check_operator(&audit, &headers) {
        return error.into_response();
    }
    let condition = audit.ledger.condition();
    let refused_streams = condition
        .damaged
        .into_iter()
        .map(|(stream, position)| RefusedStream { stream, position })
        .collect();
    axum::Json(Integrity {
        engine: audit.ledger.engine().to_owned(),
        scan_finished: !condition.scanning,
        refused_streams,
        damage_elsewhere: condition.damage_elsewhere,
        poisoned: condition.poisoned,
        unavailable: condition.unavailable,
        write_path: audit.ledger.stats(),
    })
    .into_response()
}

/// Which records a dump prints: one stream's from position `from`, or
/// every stream's in global order from global position `from`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DumpQuery {
    stream: Option<String>,
    #[serde(default)]
    from: u64,
}

/// `GET /api/admin/log/dump`: `log dump` as JSON lines, streamed as it is
/// read.
async fn dump(
    State(audit): State<Audit>,
    headers: HeaderMap,
    query: Result<Query<DumpQuery>, QueryRejection>,
) -> Response {
    let query = match admitted(&audit, &headers, query) {
        Ok(query) => query,
        Err(error) => return error.into_response(),
    };
    // A stream that does not exist is refused before the body starts.
    let lines =
        match log_commands::dump_lines(&audit.ledger, query.stream.as_deref(), query.from).await {
            Ok(lines) => lines,
            Err(error) => return printed(Vec::new(), Err(error)),
        };
    let body = async_stream::stream! {
        let mut lines = std::pin::pin!(lines);
        let mut chunk = Vec::with_capacity(DUMP_CHUNK_BYTES);
        while let Some(line) = lines.next().await {
            match line {
                Ok(line) => {
                    chunk.extend_from_slice(line.as_bytes());
                    chunk.push(b'\n');
                    if chunk.len() >= DUMP_CHUNK_BYTES {
                        let full = std::mem::replace(&mut chunk, Vec::with_capacity(DUMP_CHUNK_BYTES));
                        yield Ok::<_, std::convert::Infallible>(Bytes::from(full));
                    }
                }
                // A failure mid-dump (a damaged record) ends the body
                // early; the record before it was the last line sent, as
                // offline.
                Err(error) => {
                    tracing::warn!(%error, "audit dump ended early");
                    break;
                }
            }
        }
        if !chunk.is_empty() {
            yield Ok(Bytes::from(chunk));
        }
    };
    (
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(body),
    )
        .into_response()
}

/// `GET /api/admin/log/stats`: `log stats` of the store as it is now.
async fn stats(State(audit): State<Audit>, headers: HeaderMap) -> Response {
    if let Err(error) = check_operator(&audit, &headers) {
        return error.into_response();
    }
    let mut out = Vec::new();
    let outcome = async {
        let report = audit.ledger.verify().await?;
        log_commands::print_stats(&report, &mut out)
    }
    .await;
    printed(out, outcome)
}

/// `GET /api/admin/log/verify`: `log verify` of the store as it is now.
async fn verify(State(audit): State<Audit>, headers: HeaderMap) -> Response {
    if let Err(error) = check_operator(&audit, &headers) {
        return error.into_response();
    }
    let mut out = Vec::new();
    let outcome = async {
        let report = audit.ledger.verify().await?;
        log_commands::print_verify(report, &mut out).map(drop)
    }
    .await;
    printed(out, outcome)
}

/// The conversation a replay reads, and its principal when several hold
/// one by that id.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayQuery {
    conversation: String,
    principal: Option<String>,
}

/// `GET /api/admin/replay`: what `ledgerwire replay` prints.
async fn replay(
    State(audit): State<Audit>,
    headers: HeaderMap,
    query: Result<Query<ReplayQuery>, QueryRejection>,
) -> Response {
    let query = match admitted(&audit, &headers, query) {
        Ok(query) => query,
        Err(error) => return error.into_response(),
    };
    let mut out = Vec::new();
    let outcome = log_commands::replay(
        &audit.ledger,
        &query.conversation,
        query.principal.as_deref(),
        &mut out,
    )
    .await;
    printed(out, outcome)
}

/// `GET /api/admin/replay/check`: `replay --check` against the agent this
/// server runs.
async fn replay_check(
    State(audit): State<Audit>,
    headers: HeaderMap,
    query: Result<Query<ReplayQuery>, QueryRejection>,
) -> Response {
    let query = match admitted(&audit, &headers, query) {
        Ok(query) => query,
        Err(error) => return error.into_response(),
    };
    let mut out = Vec::new();
    let outcome = log_commands::replay_check(
        &audit.ledger,
        &query.conversation,
        query.principal.as_deref(),
        audit.agent.as_ref(),
        &mut out,
    )
    .await;
    printed(out, outcome)
}

#[cfg(test)]
mod tests {
    use super::describe_key;

    #[test]
    fn stream_keys_name_door_principal_and_id() {
        assert_eq!(
            describe_key("studio/ab12/c1"),
            ("studio", Some("ab12"), "c1")
        );
        assert_eq!(
            describe_key("statewire/@ab12/t/x"),
            ("statewire", Some("ab12"), "t/x")
        );
        assert_eq!(describe_key("statewire/t1"), ("statewire", None, "t1"));
        assert_eq!(describe_key("probe/3"), ("probe", None, "3"));
        assert_eq!(describe_key("solo"), ("other", None, "solo"));
    }
}
