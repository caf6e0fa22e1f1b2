//! What each Statewire HTTP route answers, for the OpenAPI document: the
//! negotiation headers, the statement body, the packets an SSE attach
//! streams, and every refusal as a JSON `{"fin": …}` with the status its
//! code carries; the WebSocket route as an upgrade.
//!
//! Owns: the Statewire routes' descriptions. Must never: change what a
//! route does; a description follows the handler.

use aide::transform::TransformOperation;
use schemars::Schema;
use serde_json::json;

use crate::ids::MAX_THREAD_ID_BYTES;
use crate::packet::{Fin, Frame};
use ledgerwire_foundations::api_docs::{self, BEARER_SCHEME, JSON};

type Op<'t> = TransformOperation<'t>;

/// A refusal before anything streams: a packet holding only its `fin`.
fn fin_body() -> Schema {
    let fin = api_docs::schema_of::<Fin>();
    api_docs::schema(json!({
        "type": "object",
        "required": ["fin"],
        "properties": {"fin": fin},
        "additionalProperties": false,
    }))
}

/// The `fin` refusals of a route, by status.
fn refusals<'t>(mut op: Op<'t>, statuses: &[(u16, &str)]) -> Op<'t> {
    for (status, description) in statuses {
        op = api_docs::respond(op, *status, description, Some((JSON, fin_body())));
    }
    op
}

const BAD_REQUEST: (u16, &str) = (
    400,
    "`invalid-negotiation` (a bad thread id, header or first message), `invalid-frame`, \
     `sequence-gap` or `invalid-context`.",
);
const UNAUTHORIZED: (u16, &str) = (401, "`unauthorized`: missing or refused credentials.");
const UNSUPPORTED: (u16, &str) = (
    406,
    "`unsupported-version` or `unsupported-protocol`; `payload` lists what the host serves.",
);
const FAILED: (u16, &str) = (
    500,
    "`server-error`, `projection-failed` or `thread-damaged`.",
);
const UNAVAILABLE: (u16, &str) = (
    503,
    "`too-many-attaches`, `shutting-down` or `store-unavailable`: attach again after `Retry-After` seconds.",
);

/// The thread's path parameter, its security and its tag.
fn thread_route<'t>(op: Op<'t>, id: &str, summary: &str) -> Op<'t> {
    let op = op.id(id).summary(summary).tag("statewire");
    let thread = api_docs::schema(json!({
        "type": "string",
        "pattern": "^[A-Za-z0-9_.-]+$",
        "minLength": 1,
        "maxLength": MAX_THREAD_ID_BYTES,
    }));
    let op = api_docs::path_parameter(op, "thread", "The thread's id.", thread);
    api_docs::secured(op, BEARER_SCHEME)
}

/// One packet: `syn`, `ops`, `ans`, `dur` and `fin` members (their
/// shapes are docs/statewire.md's).
struct Packet;

impl schemars::JsonSchema for Packet {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "StatewirePacket".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> Schema {
        let fin = generator.subschema_for::<Fin>();
        schemars::json_schema!({
            "type": "object",
            "description": "A Statewire packet: `syn`, `ops`, `ans`, `dur` and `fin` members.",
            "properties": {"syn": true, "ops": {"type": "array"}, "ans": {"type": "array"},
                "dur": {"type": "array"}, "fin": fin},
            "additionalProperties": false,
        })
    }
}

fn text() -> Schema {
    api_docs::schema(json!({"type": "string"}))
}

/// The negotiation headers an attach (or a commands query) sends.
fn negotiation(op: Op<'_>) -> Op<'_> {
    let headers = [
        (
            "Statewire-Version",
            true,
            "The wire versions offered, e.g. `\"2026-11-02\"; min-version=\"2026-09-30\"`.",
        ),
        (
            "Statewire-Protocol",
            true,
            "The protocols offered, e.g. `acme-chat; version=\"2026-09-13\"`.",
        ),
        (
            "Statewire-Attacher",
            false,
            "Who attaches (required from wire 2026-11-02).",
        ),
        (
            "Statewire-Cursor",
            false,
            "Where a resumed attach picks up.",
        ),
        (
            "Statewire-Client-Id",
            false,
            "The client's id (minted when absent).",
        ),
    ];
    headers
        .into_iter()
        .fold(op, |op, (name, required, description)| {
            api_docs::header(op, name, required, description, text())
        })
}

const PACKETS: &str = "An SSE stream of packets: the first is the hello (`syn`), then \
    `ops`, `ans` and `dur` as the thread changes; a `fin` ends it. The response headers \
    carry `Statewire-Lease` (for `/frames`), `Statewire-Client-Id` and the selection.";

/// An SSE attach: the packets, or a `fin` before streaming.
fn attach(op: Op<'_>) -> Op<'_> {
    let op = negotiation(op);
    let op = api_docs::event_stream::<Packet>(op, 200, PACKETS);
    refusals(
        op,
        &[BAD_REQUEST, UNAUTHORIZED, UNSUPPORTED, FAILED, UNAVAILABLE],
    )
}

pub(super) fn get_stream(op: Op<'_>) -> Op<'_> {
    attach(thread_route(op, "attach", "Attach to a thread over SSE"))
}

pub(super) fn post_stream(op: Op<'_>) -> Op<'_> {
    let op = thread_route(
        op,
        "attach_with_statements",
        "Attach over SSE with initial statements",
    );
    let frame = api_docs::schema_of::<Frame>();
    let op = api_docs::body(op, &[JSON], false, &frame);
    attach(op)
}

pub(super) fn frames(op: Op<'_>) -> Op<'_> {
    let op = thread_route(op, "frames", "Send statements under an attach's lease");
    // Not `required` here: without it the request is answered as with a
    // lease no attach holds (410 `unknown-lease`, docs/statewire.md).
    let op = api_docs::header(
        op,
        "Statewire-Lease",
        false,
        "The lease an SSE attach answered with; without it, 410 `unknown-lease`.",
        text(),
    );
    let frame = api_docs::schema_of::<Frame>();
    let op = api_docs::body(op, &[JSON], true, &frame);
    let op = api_docs::respond(
        op,
        204,
        "Submitted; the answers arrive on the attach's stream.",
        None,
    );
    refusals(
        op,
        &[
            BAD_REQUEST,
            UNAUTHORIZED,
            (
                410,
                "`unknown-lease`: no live attach of this thread holds the lease.",
            ),
            FAILED,
            UNAVAILABLE,
        ],
    )
}

pub(super) fn commands(op: Op<'_>) -> Op<'_> {
    let op = thread_route(
        op,
        "commands",
        "The commands an attach with these headers may send",
    );
    let op = negotiation(op);
    let body = api_docs::schema(json!({
        "type": "object",
        "required": ["version", "protocols"],
        "properties": {"version": {"type": "string"}, "protocols": true},
    }));
    let op = api_docs::respond(
        op,
        200,
        "The wire version selected and each protocol's commands.",
        Some((JSON, body)),
    );
    refusals(op, &[BAD_REQUEST, UNAUTHORIZED, UNSUPPORTED])
}

pub(super) fn websocket(op: Op<'_>) -> Op<'_> {
    let op = thread_route(op, "attach_websocket", "Attach to a thread over WebSocket");
    // The token may come in the first message instead of the handshake.
    let op = api_docs::security_optional(op).description(
        "A WebSocket upgrade with subprotocol `statewire.v1`. The first text message \
             carries `{headers, ctx?, cmd?}` (handshake headers take precedence); packets \
             follow as text messages, and a `fin` closes the socket with 1008.",
    );
    let op = api_docs::query_parameter(
        op,
        "client",
        false,
        "The client's id (minted when absent).",
        text(),
    );
    let op = api_docs::header(
        op,
        "Sec-WebSocket-Protocol",
        true,
        "Must offer `statewire.v1`.",
        text(),
    );
    refusals(
        op,
        &[(
            400,
            "`invalid-negotiation`: not a WebSocket upgrade, or `statewire.v1` not offered.",
        )],
    )
}
