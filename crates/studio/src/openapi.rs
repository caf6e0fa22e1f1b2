//! What each Studio route answers, for the OpenAPI document: the body a
//! request route reads (its branch of the `StudioRequest` union), the
//! frames its SSE stream carries, and every status it refuses with, each
//! a `WireError`.
//!
//! Owns: the Studio routes' descriptions. Must never: change what a route
//! does; a description follows the handler, and the schemathesis run in
//! the test suite checks that it does.

use aide::transform::TransformOperation;
use schemars::Schema;
use serde_json::json;

use ledgerwire_foundations::api_docs::{self, BEARER_SCHEME, JSON};
use ledgerwire_wire::composition::CompositionManifest;
use ledgerwire_wire::ids::ConversationId;
use ledgerwire_wire::request::{ReconnectRequest, RequestKind, StudioRequest};
use ledgerwire_wire::{Frame, WireError};

type Op<'t> = TransformOperation<'t>;

/// Refusals every authenticated Studio route may answer.
const COMMON_REFUSALS: &[(u16, &str)] = &[
    (
        401,
        "`unauthorized`: no bearer token, or one the server refuses.",
    ),
    (
        404,
        "`not_found`: the conversation (or what the request names) is not held for this token.",
    ),
    (
        409,
        "`edit_conflict` (stale revision, or another answer to the same pause) or \
         `transient_unavailable` (a live segment holds the conversation: retry after \
         `retry_after_seconds`).",
    ),
    (
        422,
        "`binding_invalid`: a member is out of bounds; `pointer` names it.",
    ),
    (
        500,
        "`conversation_damaged`: the conversation's records fail their checks; never retryable.",
    ),
];

/// Refusals of the routes that read a request body.
const BODY_REFUSALS: &[(u16, &str)] = &[
    (
        400,
        "`malformed_request`: the body is not JSON, or not this route's kind.",
    ),
    (
        413,
        "`payload_too_large`: the body is over the route's bound.",
    ),
    (
        415,
        "`unsupported_media_type`: the body is declared as something other than JSON.",
    ),
];

/// An authenticated Studio route that reads a body of `kind`.
fn request_route<'t>(op: Op<'t>, id: &str, summary: &str, kind: RequestKind) -> Op<'t> {
    let op = op.id(id).summary(summary).tag("studio");
    let op = api_docs::body(op, &[JSON], true, &request_branch(kind));
    refused(op, true)
}

/// The Studio's refusals, and its security scheme.
fn refused(op: Op<'_>, reads_body: bool) -> Op<'_> {
    let op = api_docs::secured(op, BEARER_SCHEME);
    let op = api_docs::refusals::<WireError>(op, COMMON_REFUSALS);
    if reads_body {
        api_docs::refusals::<WireError>(op, BODY_REFUSALS)
    } else {
        op
    }
}

/// The branch of the `StudioRequest` union that `kind` names: the body
/// its route reads, `kind` member included.
fn request_branch(kind: RequestKind) -> Schema {
    api_docs::schema_of::<StudioRequest>();
    let branch = aide::generate::in_context(|ctx| {
        let union = ctx.schema.definitions().get("StudioRequest")?;
        union["oneOf"]
            .as_array()?
            .iter()
            .find(|branch| branch["properties"]["kind"]["const"] == kind.as_str())
            .cloned()
    });
    branch.map_or_else(
        || api_docs::schema(json!({"type": "object"})),
        api_docs::schema,
    )
}

const FRAMES: &str = "An SSE stream: each event's `id` is the frame's `seq` and its `data` one \
    frame. It ends on a pause (`plan.proposed`, `elicitation.request`), `done` or a \
    stream-fatal `error`; `: ka` comments keep it alive.";

pub(super) fn turn(op: Op<'_>) -> Op<'_> {
    let op = request_route(op, "turn", "Start or continue a turn", RequestKind::Turn);
    api_docs::event_stream::<Frame>(op, 200, FRAMES)
}

pub(super) fn interrupt(op: Op<'_>) -> Op<'_> {
    let op = request_route(
        op,
        "interrupt",
        "Answer a pause and resume the turn",
        RequestKind::InterruptResponse,
    );
    api_docs::event_stream::<Frame>(op, 200, FRAMES)
}

pub(super) fn cancel(op: Op<'_>) -> Op<'_> {
    let op = request_route(
        op,
        "cancel",
        "Stop the conversation's live segment",
        RequestKind::Cancel,
    );
    api_docs::respond(op, 204, "Stopped (or nothing was running).", None)
}

pub(super) fn composition(op: Op<'_>) -> Op<'_> {
    let op = request_route(
        op,
        "composition",
        "Apply composition operations, all or none",
        RequestKind::CompositionMutate,
    );
    api_docs::json::<CompositionManifest>(op, 200, "The composition after the operations.")
}

pub(super) fn reconnect(op: Op<'_>) -> Op<'_> {
    let op = op
        .id("stream")
        .summary("Read the current turn again, then follow it live")
        .description(
            "ledgerwire's reconnect extension: the turn's recorded frames after `after_seq` \
             (or `Last-Event-ID`), then the live segment's, ending on a frame that ends a stream.",
        )
        .tag("studio");
    let op = api_docs::body(
        op,
        &[JSON],
        true,
        &api_docs::schema_of::<ReconnectRequest>(),
    );
    let op = api_docs::header(
        op,
        "Last-Event-ID",
        false,
        "The last seq the client holds, when the body has no `after_seq`.",
        api_docs::schema(json!({"type": "string"})),
    );
    let op = refused(op, true);
    api_docs::event_stream::<Frame>(op, 200, FRAMES)
}

/// A read route under `/api/studio/conversations/{conversation_id}/`.
fn read_route<'t>(op: Op<'t>, id: &str, summary: &str) -> Op<'t> {
    let op = op.id(id).summary(summary).tag("studio-reads");
    let op = api_docs::path_parameter(
        op,
        "conversation_id",
        "The conversation's id.",
        api_docs::schema_of::<ConversationId>(),
    );
    refused(op, false)
}

pub(super) fn read_composition(op: Op<'_>) -> Op<'_> {
    let op = read_route(op, "read_composition", "The conversation's canvas");
    let manifest = api_docs::schema_of::<CompositionManifest>();
    let body = api_docs::schema(json!({
        "type": "object",
        "required": ["conversation_id", "composition"],
        "properties": {
            "conversation_id": {"type": "string"},
            "composition": {"anyOf": [manifest, {"type": "null"}]},
        },
    }));
    api_docs::respond(
        op,
        200,
        "The composition (`null` before the first card).",
        Some((JSON, body)),
    )
}

pub(super) fn timeline(op: Op<'_>) -> Op<'_> {
    let op = read_route(op, "timeline", "A page of the conversation's records");
    let op = api_docs::refusals::<WireError>(
        op,
        &[(
            400,
            "`malformed_request`: the query is not a timeline page.",
        )],
    );
    let body = api_docs::schema(json!({
        "type": "object",
        "required": ["conversation_id", "head", "records", "next"],
        "properties": {
            "conversation_id": {"type": "string"},
            "head": {"type": "integer", "minimum": 0},
            "records": {"type": "array", "items": {
                "type": "object",
                "required": ["position", "timestamp_ms", "kind", "payload"],
                "properties": {
                    "position": {"type": "integer", "minimum": 0},
                    "timestamp_ms": {"type": "integer", "minimum": 0},
                    "kind": {"type": "string"},
                    "payload": true,
                },
            }},
            "next": {"type": ["integer", "null"], "minimum": 0},
        },
    }));
    api_docs::respond(
        op,
        200,
        "Records from `from`; `next` is where the following page starts (`null` at the end).",
        Some((JSON, body)),
    )
}

pub(super) fn check(op: Op<'_>) -> Op<'_> {
    let op = read_route(
        op,
        "check",
        "Run the recorded segments through the agent again",
    );
    let op = api_docs::refusals::<WireError>(
        op,
        &[(
            503,
            "`capability_unavailable`: too many records to check over HTTP.",
        )],
    );
    let body = api_docs::schema(json!({
        "type": "object",
        "required": ["conversation_id", "segments", "same", "differ", "skipped"],
        "properties": {
            "conversation_id": {"type": "string"},
            "segments": {"type": "array", "items": {
                "type": "object",
                "required": ["segment", "turn", "agent_frames", "live", "verdict"],
                "properties": {
                    "verdict": {"enum": ["same", "differs", "skipped"]},
                    "live": {"type": "boolean"},
                },
            }},
            "same": {"type": "integer", "minimum": 0},
            "differ": {"type": "integer", "minimum": 0},
            "skipped": {"type": "integer", "minimum": 0},
        },
    }));
    api_docs::respond(op, 200, "Each segment's verdict.", Some((JSON, body)))
}
