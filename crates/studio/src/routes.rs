//! The Studio's HTTP routes: authentication, body limits, parsing, and the
//! SSE framing of what the service streams.
//!
//! Owns: `POST /api/studio/{turn,interrupt,cancel,composition,stream}`
//! (their descriptions for the OpenAPI document are `studio::openapi`).
//! Must never: decide anything about a conversation (the service does),
//! or answer an error outside the wire error grammar.

use std::time::Duration;

use aide::axum::ApiRouter;
use aide::axum::routing::post_with;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};

use super::auth;
use super::keyed::Applied;
use super::openapi as docs;
use super::reads;
use super::service::Studio;
use super::sse::{self, SseEvent, open_sse};
use ledgerwire_wire::error::{ErrorCode, Retry};
use ledgerwire_wire::limits::{MAX_REQUEST_BYTES, MAX_TURN_REQUEST_BYTES};
use ledgerwire_wire::{self as wire, WireError};

/// The Studio routes, each with its description for the OpenAPI
/// document (`studio::openapi`), and the read routes (`studio::reads`).
pub fn api() -> ApiRouter<Studio> {
    ApiRouter::new()
        .api_route("/api/studio/turn", post_with(turn, docs::turn))
        .api_route(
            "/api/studio/interrupt",
            post_with(interrupt, docs::interrupt),
        )
        .api_route("/api/studio/cancel", post_with(cancel, docs::cancel))
        .api_route(
            "/api/studio/composition",
            post_with(composition, docs::composition),
        )
        .api_route("/api/studio/stream", post_with(reconnect, docs::reconnect))
        .merge(reads::api())
}

/// The Studio routes over a service.
pub fn router(studio: Studio) -> Router {
    api().with_state(studio).into()
}

/// Whether a `Content-Type` may carry a Studio request. The body is JSON
/// whatever the header says; besides JSON types, the header `curl -d`
/// sends (`application/x-www-form-urlencoded`) and the one of a browser's
/// simple request (`text/plain`) are accepted, as is no header at all.
pub fn accepts_content_type(value: Option<&str>) -> bool {
    let Some(value) = value else { return true };
    let essence = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    matches!(
        essence.as_str(),
        "application/json" | "application/x-www-form-urlencoded" | "text/plain"
    ) || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// Reads a body of at most `max_bytes`, refusing a larger one unread and
/// one whose `Content-Type` says it is not JSON.
async fn read_body(headers: &HeaderMap, body: Body, max_bytes: usize) -> Result<Bytes, WireError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .map(|value| value.to_str().unwrap_or("(not text)"));
    if !accepts_content_type(content_type) {
        return Err(WireError {
            code: ErrorCode::UnsupportedMediaType,
            retry: Retry::CorrectAndRetry {
                fix: "send the body as JSON with `Content-Type: application/json`".to_owned(),
            },
            detail: format!(
                "The body is declared as {:?}; this route reads JSON.",
                content_type.unwrap_or_default()
            ),
            pointer: None,
        });
    }
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if let Some(len) = declared
        && len > max_bytes
    {
        return Err(WireError::too_large(len, max_bytes));
    }
    axum::body::to_bytes(body, max_bytes)
        .await
        .map_err(|_| WireError::too_large(declared.unwrap_or(max_bytes + 1), max_bytes))
}

fn sse(mut receiver: tokio::sync::mpsc::Receiver<SseEvent>) -> Response {
    // Heartbeats are the segment's own (`: ka`, with lease renewal), so
    // axum's keep-alive is off. Dropping this stream (the client left)
    // closes the channel, which the segment notices.
    let events = async_stream::stream! {
        let _open = open_sse();
        while let Some(item) = receiver.recv().await {
            yield item;
        }
    };
    sse::response(events, None)
}

async fn turn(State(studio): State<Studio>, headers: HeaderMap, body: Body) -> Response {
    let result = async {
        let principal = auth::from_headers(&studio.config().auth, &headers)?;
        let body = read_body(&headers, body, MAX_TURN_REQUEST_BYTES).await?;
        let request = wire::parse_turn_request(&body)?;
        ledgerwire_foundations::telemetry::note_conversation(request.conversation_id.as_str());
        studio
            .start_turn(&principal, request, None)
            .await?
            .into_stream()
    };
    match result.await {
        Ok(receiver) => sse(receiver),
        Err(error) => error.into_response(),
    }
}

async fn interrupt(State(studio): State<Studio>, headers: HeaderMap, body: Body) -> Response {
    let result = async {
        let principal = auth::from_headers(&studio.config().auth, &headers)?;
        let body = read_body(&headers, body, MAX_REQUEST_BYTES).await?;
        let response = wire::parse_interrupt_response(&body)?;
        ledgerwire_foundations::telemetry::note_conversation(response.conversation_id.as_str());
        studio
            .resume(&principal, response, None)
            .await?
            .into_stream()
    };
    match result.await {
        Ok(receiver) => sse(receiver),
        Err(error) => error.into_response(),
    }
}

async fn cancel(State(studio): State<Studio>, headers: HeaderMap, body: Body) -> Response {
    let result = async {
        let principal = auth::from_headers(&studio.config().auth, &headers)?;
        let body = read_body(&headers, body, MAX_REQUEST_BYTES).await?;
        let request = wire::parse_cancel_request(&body)?;
        ledgerwire_foundations::telemetry::note_conversation(request.conversation_id.as_str());
        studio.cancel(&principal, &request, None).await.map(drop)
    };
    match result.await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(error) => error.into_response(),
    }
}

async fn composition(State(studio): State<Studio>, headers: HeaderMap, body: Body) -> Response {
    let result = async {
        let principal = auth::from_headers(&studio.config().auth, &headers)?;
        let body = read_body(&headers, body, MAX_REQUEST_BYTES).await?;
        let mutation = wire::parse_composition_mutation(&body)?;
        ledgerwire_foundations::telemetry::note_conversation(mutation.conversation_id.as_str());
        studio
            .mutate(&principal, mutation, None)
            .await
            .map(Applied::into_inner)
    };
    match result.await {
        Ok(manifest) => Json(manifest).into_response(),
        Err(error) => error.into_response(),
    }
}

/// `POST /api/studio/stream`: the current turn's frames after `after_seq`
/// (or `Last-Event-ID`) from the ledger, then the live segment's.
async fn reconnect(State(studio): State<Studio>, headers: HeaderMap, body: Body) -> Response {
    let result = async {
        let principal = auth::from_headers(&studio.config().auth, &headers)?;
        let body = read_body(&headers, body, MAX_REQUEST_BYTES).await?;
        let request: wire::request::ReconnectRequest =
            serde_json::from_slice(&body).map_err(|error| {
                WireError::malformed(
                    None,
                    format!("The body is not a reconnect request: {error}."),
                    "send {\"conversation_id\": …, \"after_seq\": N}",
                )
            })?;
        ledgerwire_foundations::telemetry::note_conversation(request.conversation_id.as_str());
        let last_event_id = headers
            .get("last-event-id")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let after_seq = request.after_seq.or(last_event_id).unwrap_or(0);
        let folded = studio
            .conversation(&principal, &request.conversation_id)
            .await?;
        let Some((turn, from)) = folded
            .state
            .current_turn()
            .map(|t| (t.turn, t.first_position))
        else {
            return Err(WireError::not_found(
                "/conversation_id",
                "No conversation with this id is held for you.",
            ));
        };
        Ok(studio.follow(&principal, &request.conversation_id, turn, from, after_seq))
    };
    match result.await {
        Ok(stream) => sse::response(
            stream,
            Some((Duration::from_millis(studio.config().heartbeat_ms), "ka")),
        ),
        Err(error) => error.into_response(),
    }
}
