//! The HTTP transport: `GET|POST /threads/{thread}/stream` (an SSE
//! attach whose first event is the hello) and `POST
//! /threads/{thread}/frames` (statements bound to a lease), plus the
//! router that also mounts the WebSocket transport.
//!
//! Owns: mapping HTTP requests to [`Host::attach`] and [`Host::submit`],
//! JSON `fin` bodies before streaming, `fin` events after.
//! Must never: let negotiation fields on `/frames` change a lease's
//! selection, or serve `/frames` to other credentials than the lease's.

use aide::axum::ApiRouter;
use aide::axum::routing::{get_with, post_with};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};

use crate::host::{AttachRequest, Host};
use crate::ids::{PrincipalId, ThreadId};
use crate::negotiation::{ATTACHER_FIELD, CURSOR_FIELD, PROTOCOL_FIELD, VERSION_FIELD};
use crate::packet::{Fin, FinCode, Frame, FrameViolation, parse_frame};
use crate::response::{LEASE_HEADER, fin_response, header_value};

/// Request header naming the client.
pub const CLIENT_ID_HEADER: &str = "statewire-client-id";
/// Interval of SSE keep-alive comments, in seconds.
pub const SSE_KEEPALIVE_SECS: u64 = 15;

/// The Statewire routes, each with its description for the OpenAPI
/// document (`statewire::openapi`).
pub fn api() -> ApiRouter<Host> {
    use crate::openapi as docs;
    ApiRouter::new()
        .api_route(
            "/threads/{thread}/stream",
            get_with(get_stream, docs::get_stream).post_with(post_stream, docs::post_stream),
        )
        .api_route(
            "/threads/{thread}/frames",
            post_with(post_frames, docs::frames),
        )
        .api_route(
            "/threads/{thread}/commands",
            get_with(get_commands, docs::commands),
        )
        .api_route(
            "/threads/{thread}/ws",
            get_with(crate::ws::upgrade, docs::websocket),
        )
}

/// The Statewire routes over `host`.
pub fn router(host: Host) -> Router {
    api().with_state(host).into()
}

fn request_from_headers(thread: String, headers: &HeaderMap) -> Result<AttachRequest, Fin> {
    Ok(AttachRequest {
        thread,
        client: header_value(headers, CLIENT_ID_HEADER)?,
        authorization: header_value(headers, header::AUTHORIZATION.as_str())?,
        version: header_value(headers, VERSION_FIELD)?,
        protocol: header_value(headers, PROTOCOL_FIELD)?,
        attacher: header_value(headers, ATTACHER_FIELD)?,
        cursor: header_value(headers, CURSOR_FIELD)?,
        initial: Frame::default(),
    })
}

async fn get_stream(
    State(host): State<Host>,
    Path(thread): Path<String>,
    headers: HeaderMap,
) -> Response {
    stream(host, thread, headers, Bytes::new()).await
}

async fn post_stream(
    State(host): State<Host>,
    Path(thread): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    stream(host, thread, headers, body).await
}

fn fin_violation(violation: &FrameViolation) -> Fin {
    Fin::new(violation.code, violation.message.clone())
}

/// Parses an initial-statement body after negotiation succeeds: the
/// request is negotiated first, then its frame is read.
async fn stream(host: Host, thread: String, headers: HeaderMap, body: Bytes) -> Response {
    // Credentials first: a refused caller learns nothing of the request's
    // other fields, the ranges served or the thread.
    if let Err(fin) = authorize(&host, &thread, &headers) {
        return fin_response(fin);
    }
    let request = match request_from_headers(thread, &headers) {
        Ok(request) => request,
        Err(fin) => return fin_response(fin),
    };
    // Negotiate (and authenticate) before reading the body, so a bad
    // body never hides a negotiation failure; nothing is installed yet.
    if let Err(fin) = preflight(&host, &request) {
        return fin_response(fin);
    }
    let initial = if body.iter().all(u8::is_ascii_whitespace) {
        Frame::default()
    } else {
        match parse_frame(&body) {
            Ok(frame) => frame,
            Err(violation) => return fin_response(fin_violation(&violation)),
        }
    };
    let mut handle = match host.attach(AttachRequest { initial, ..request }).await {
        Ok(handle) => handle,
        Err(fin) => return fin_response(fin),
    };
    let attach = handle.attach.clone();
    // Other instances must find the lease before its first frame can
    // reach them: an attach whose lease cannot be recorded ends now.
    if let Some(relay) = host.relay()
        && let Err(error) = relay.record(&attach.lease, attach.scope()).await
    {
        let fin = crate::host::store_fin(&error);
        host.end(&attach, fin.clone());
        return fin_response(fin);
    }
    let mut response_headers = HeaderMap::new();
    let insert = |headers: &mut HeaderMap, name: &'static str, value: String| {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    };
    insert(
        &mut response_headers,
        CLIENT_ID_HEADER,
        attach.client.to_string(),
    );
    insert(&mut response_headers, LEASE_HEADER, attach.lease.clone());
    insert(
        &mut response_headers,
        VERSION_FIELD,
        format!("\"{}\"", attach.selection.wire),
    );
    let parents: Vec<String> = attach
        .selection
        .parents()
        .map(|p| format!("{}; version=\"{}\"", p.name, p.version))
        .collect();
    insert(&mut response_headers, PROTOCOL_FIELD, parents.join(", "));
    let after_hello = std::mem::take(&mut handle.after_hello);
    if !after_hello.cmd.is_empty() {
        let host = host.clone();
        let attach = attach.clone();
        tokio::spawn(async move {
            if let Err(violation) = host.submit(&attach, after_hello).await {
                host.end(&attach, fin_violation(&violation));
            }
        });
    }
    let events = async_stream::stream! {
        while let Some(packet) = handle.next().await {
            let last = packet.fin;
            yield Ok::<Event, std::convert::Infallible>(Event::default().data(packet.json));
            if last {
                break;
            }
        }
    };
    let sse = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(std::time::Duration::from_secs(SSE_KEEPALIVE_SECS)));
    (response_headers, sse).into_response()
}

/// A `/frames` request under a lease this instance does not hold, relayed
/// to the instance that does (once: a relayed request is never relayed
/// again); `None` when no other instance holds it.
async fn relay(
    host: &Host,
    thread: &str,
    principal: Option<PrincipalId>,
    lease: &str,
    headers: &HeaderMap,
    body: Bytes,
) -> Option<Response> {
    use crate::relay::{RELAYED_HEADER, Relayed};
    let relay = host.relay()?;
    if headers.contains_key(RELAYED_HEADER) {
        return None;
    }
    let thread = ThreadId::new(thread).ok()?;
    let scope = crate::ids::ThreadScope::new(principal, thread);
    match relay.relay(lease, &scope, headers, body).await {
        Relayed::Answered(response) => Some(response),
        Relayed::Unknown => None,
        Relayed::Unavailable(error) => Some(fin_response(crate::host::store_fin(&error))),
    }
}

/// Authenticates a request's `Authorization` header for `thread`.
pub fn authorize(
    host: &Host,
    thread: &str,
    headers: &HeaderMap,
) -> Result<Option<PrincipalId>, Fin> {
    let thread =
        ThreadId::new(thread).map_err(|e| Fin::new(FinCode::InvalidNegotiation, e.to_string()))?;
    let authorization = header_value(headers, header::AUTHORIZATION.as_str()).map_err(|_| {
        Fin::new(
            FinCode::Unauthorized,
            "the Authorization header is not text",
        )
    })?;
    host.authenticate(&thread, authorization.as_deref())
}

/// Authentication and negotiation only, changing nothing.
pub fn preflight(host: &Host, request: &AttachRequest) -> Result<(), Fin> {
    host.select(request).map(drop)
}

/// `GET /threads/{thread}/commands`: the commands an attach negotiated
/// with these request fields may send, per protocol, in its contract.
async fn get_commands(
    State(host): State<Host>,
    Path(thread): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Err(fin) = authorize(&host, &thread, &headers) {
        return fin_response(fin);
    }
    let selection = request_from_headers(thread, &headers).and_then(|r| host.select(&r));
    match selection {
        Ok(selection) => {
            let body = serde_json::json!({
                "version": selection.wire,
                "protocols": host.commands(&selection),
            });
            axum::Json(body).into_response()
        }
        Err(fin) => fin_response(fin),
    }
}

async fn post_frames(
    State(host): State<Host>,
    Path(thread): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    // Credentials first, then the lease they must match: the captured
    // authorization binds the lease. Negotiation headers are ignored.
    let principal = match authorize(&host, &thread, &headers) {
        Ok(principal) => principal,
        Err(fin) => return fin_response(fin),
    };
    let unknown = || Fin::new(FinCode::UnknownLease, "no live attach holds this lease");
    let lease = match header_value(&headers, LEASE_HEADER) {
        Ok(Some(lease)) => lease,
        Ok(None) => return fin_response(unknown()),
        Err(fin) => return fin_response(fin),
    };
    let Some(attach) = host.lease(&lease) else {
        return relay(&host, &thread, principal, &lease, &headers, body)
            .await
            .unwrap_or_else(|| fin_response(unknown()));
    };
    if attach.thread().as_str() != thread {
        return fin_response(unknown());
    }
    if principal != attach.principal {
        return fin_response(Fin::new(
            FinCode::Unauthorized,
            "the lease belongs to other credentials",
        ));
    }
    let frame = match parse_frame(&body) {
        Ok(frame) => frame,
        Err(violation) => {
            let fin = fin_violation(&violation);
            host.end(&attach, fin.clone());
            return fin_response(fin);
        }
    };
    // In a task of its own: a client that hangs up mid-request must not
    // cancel a command halfway (its admission may already be durable).
    let submitted = {
        let (host, attach) = (host.clone(), attach.clone());
        tokio::spawn(async move { host.submit(&attach, frame).await })
    };
    let submitted = submitted.await.unwrap_or_else(|_| {
        Err(FrameViolation {
            code: FinCode::ServerError,
            message: "the frame's task failed".into(),
        })
    });
    match submitted {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(violation) => {
            let fin = fin_violation(&violation);
            host.end(&attach, fin.clone());
            fin_response(fin)
        }
    }
}
