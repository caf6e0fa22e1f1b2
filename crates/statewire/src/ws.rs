//! The WebSocket transport: `GET /threads/{thread}/ws?client=<id>` with
//! subprotocol `statewire.v1`. The first client text message carries
//! `{headers, ctx?, cmd?}`; handshake headers take precedence over it.
//!
//! Owns: the socket's life: initialisation (with a timeout), forwarding
//! packets, reading frames, and closing with 1008 after a `fin`.
//! Must never: accept a duplicate initialisation header, or read a frame
//! under any selection but the one its hello fixed.

use std::collections::HashMap;
use std::time::Duration;

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, header};
use axum::response::Response;
use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;

use crate::host::{AttachRequest, Host};
use crate::negotiation::{ATTACHER_FIELD, CURSOR_FIELD, PROTOCOL_FIELD, VERSION_FIELD};
use crate::packet::{Fin, FinCode, Frame, Packet, parse_frame, parse_init};
use crate::response::{fin_response, header_value};

/// The WebSocket subprotocol.
pub const SUBPROTOCOL: &str = "statewire.v1";
/// Time allowed for the initialisation message, in milliseconds.
pub const WS_INIT_TIMEOUT_MS: u64 = 10_000;
/// Close code after a `fin` (policy violation).
pub const CLOSE_POLICY: u16 = 1008;

pub(crate) async fn upgrade(
    State(host): State<Host>,
    Path(thread): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    // A request that is no WebSocket upgrade is refused in the door's own
    // grammar (a `fin`), not with the framework's plain-text rejection.
    let upgrade = match upgrade {
        Ok(upgrade) => upgrade,
        Err(rejection) => {
            return fin_response(Fin::new(
                FinCode::InvalidNegotiation,
                format!(
                    "this route is a WebSocket upgrade: {}",
                    rejection.body_text()
                ),
            ));
        }
    };
    let offered = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|p| p.trim() == SUBPROTOCOL);
    if !offered {
        return fin_response(Fin::new(
            FinCode::InvalidNegotiation,
            format!("the WebSocket subprotocol must be {SUBPROTOCOL}"),
        ));
    }
    let client = query.get("client").cloned();
    upgrade
        .protocols([SUBPROTOCOL])
        .on_upgrade(move |socket| run(host, thread, client, headers, socket))
}

async fn send_fin_and_close(socket: &mut WebSocket, fin: Fin) {
    let _ = socket
        .send(Message::Text(Packet::fin(fin).to_json().into()))
        .await;
    let _ = socket
        .send(Message::Close(Some(CloseFrame {
            code: CLOSE_POLICY,
            reason: "fin".into(),
        })))
        .await;
}

/// The handshake header if present, else the initialisation header.
fn pick(
    handshake: &HeaderMap,
    init: &crate::packet::InitMessage,
    name: &str,
) -> Result<Option<String>, Fin> {
    if let Some(value) = header_value(handshake, name)? {
        return Ok(Some(value));
    }
    init.header(name)
        .map(|v| v.map(str::to_owned))
        .map_err(|m| Fin::new(FinCode::InvalidNegotiation, m))
}

async fn run(
    host: Host,
    thread: String,
    client: Option<String>,
    headers: HeaderMap,
    mut socket: WebSocket,
) {
    let first =
        tokio::time::timeout(Duration::from_millis(WS_INIT_TIMEOUT_MS), socket.recv()).await;
    let text = match first {
        Ok(Some(Ok(Message::Text(text)))) => text,
        Ok(Some(Ok(_))) => {
            let fin = Fin::new(
                FinCode::InvalidNegotiation,
                "the first message must be text",
            );
            return send_fin_and_close(&mut socket, fin).await;
        }
        Err(_) => {
            let fin = Fin::new(
                FinCode::InvalidNegotiation,
                "no initialisation message in time",
            );
            return send_fin_and_close(&mut socket, fin).await;
        }
        Ok(None | Some(Err(_))) => return,
    };
    let init = match parse_init(text.as_str()) {
        Ok(init) => init,
        Err(violation) => {
            // A malformed initialisation is invalid negotiation input.
            let fin = Fin::new(FinCode::InvalidNegotiation, violation.message);
            return send_fin_and_close(&mut socket, fin).await;
        }
    };
    let request = (|| -> Result<AttachRequest, Fin> {
        Ok(AttachRequest {
            thread,
            client,
            authorization: pick(&headers, &init, header::AUTHORIZATION.as_str())?,
            version: pick(&headers, &init, VERSION_FIELD)?,
            protocol: pick(&headers, &init, PROTOCOL_FIELD)?,
            attacher: pick(&headers, &init, ATTACHER_FIELD)?,
            cursor: pick(&headers, &init, CURSOR_FIELD)?,
            initial: Frame {
                ctx: init.ctx.clone(),
                cmd: init.cmd.clone(),
            },
        })
    })();
    let request = match request {
        Ok(request) => request,
        Err(fin) => return send_fin_and_close(&mut socket, fin).await,
    };
    let mut handle = match host.attach(request).await {
        Ok(handle) => handle,
        Err(fin) => return send_fin_and_close(&mut socket, fin).await,
    };
    let attach = handle.attach.clone();
    let after_hello = std::mem::take(&mut handle.after_hello);
    let (mut sink, mut stream) = socket.split();
    // Writer: forwards packets; a fin closes the socket with 1008.
    let writer = tokio::spawn(async move {
        while let Some(packet) = handle.next().await {
            let last = packet.fin;
            if sink.send(Message::Text(packet.json.into())).await.is_err() {
                break;
            }
            if last {
                let _ = sink
                    .send(Message::Close(Some(CloseFrame {
                        code: CLOSE_POLICY,
                        reason: "fin".into(),
                    })))
                    .await;
                break;
            }
        }
        // Dropping the handle detaches.
        drop(handle);
    });
    // Frames run in a task of their own, in order: a command that was
    // admitted runs to its answer even when the client leaves meanwhile
    // (dropping the reader must not cancel it halfway).
    let (frames, queued) = mpsc::channel(MAX_QUEUED_FRAMES);
    tokio::spawn(submit_frames(
        host.clone(),
        attach.clone(),
        after_hello,
        queued,
    ));
    // The reader says whether a fin is on its way to the client (true) or
    // the client went away (false).
    let reader = async {
        while let Some(Ok(message)) = stream.next().await {
            let frame = match message {
                Message::Text(text) => parse_frame(text.as_bytes()),
                Message::Binary(_) => Err(crate::packet::FrameViolation::invalid(
                    "frames are text messages",
                )),
                Message::Close(_) => break,
                Message::Ping(_) | Message::Pong(_) => continue,
            };
            match frame {
                // The submitter stopped: it ended the attach with a fin.
                Ok(frame) => {
                    if frames.send(frame).await.is_err() {
                        return true;
                    }
                }
                Err(violation) => {
                    host.end(&attach, Fin::new(violation.code, violation.message));
                    return true;
                }
            }
        }
        // The client went away: frames not yet submitted are dropped
        // (nothing of theirs was admitted), the one running finishes.
        host.detach(&attach);
        false
    };
    let mut writer = writer;
    tokio::select! {
        fin_pending = reader => {
            // Let the writer deliver a final fin, bounded in time; with the
            // client gone there is nobody to deliver to, and the writer
            // (which holds the attach, and through it the host) ends now.
            let delivered = fin_pending
                && tokio::time::timeout(Duration::from_millis(FIN_DELIVERY_MS), &mut writer)
                    .await
                    .is_ok();
            if !delivered {
                writer.abort();
            }
        }
        _ = &mut writer => {}
    }
}

/// Longest the writer may take to deliver a final fin after the reader
/// ended, in milliseconds.
const FIN_DELIVERY_MS: u64 = 5_000;

/// Frames read from a socket and not yet submitted; reading waits when
/// this many are queued.
pub const MAX_QUEUED_FRAMES: usize = 16;

/// Submits an attach's frames in order until one is a violation (which
/// ends the attach) or the reader stops sending.
async fn submit_frames(
    host: Host,
    attach: std::sync::Arc<crate::host::Attach>,
    first: Frame,
    mut frames: mpsc::Receiver<Frame>,
) {
    let mut next = (!first.cmd.is_empty()).then_some(first);
    loop {
        let frame = match next.take() {
            Some(frame) => frame,
            None => match frames.recv().await {
                Some(frame) => frame,
                None => return,
            },
        };
        if let Err(violation) = host.submit(&attach, frame).await {
            host.end(&attach, Fin::new(violation.code, violation.message));
            return;
        }
    }
}
