//! What each audit route (`/api/admin/…`) answers, for the OpenAPI
//! document: its query (from the route's own query type), its body (JSON,
//! JSON lines or the offline command's text) and its refusals, each a
//! `WireError`.
//!
//! Owns: the audit routes' descriptions. Must never: change what a route
//! does; a description follows the handler.

use aide::transform::TransformOperation;
use schemars::Schema;
use serde_json::json;

use crate::api_docs::{self, JSON, OPERATOR_SCHEME};
use crate::wire::WireError;

use super::audit_answers::{EXIT_CODE_HEADER, FAILURE_HEADER, Integrity};

type Op<'t> = TransformOperation<'t>;

const TEXT: &str = "text/plain; charset=utf-8";

/// An audit route: its tag, the operator token, and the refusals every
/// audit route may answer.
fn route<'t>(op: Op<'t>, id: &str, summary: &str) -> Op<'t> {
    let op = op.id(id).summary(summary).tag("audit");
    let op = api_docs::secured(op, OPERATOR_SCHEME);
    api_docs::refusals::<WireError>(
        op,
        &[
            (401, "`unauthorized`: no operator token, or another token."),
            (
                404,
                "`not_found`: the audit API is off (no `LEDGERWIRE_ADMIN_TOKEN`), or what the \
                 query names does not exist.",
            ),
            (
                409,
                "`transient_unavailable`: the read failed; retry after `retry_after_seconds`.",
            ),
        ],
    )
}

/// The refusals of a route that reads a query.
fn queried(op: Op<'_>) -> Op<'_> {
    api_docs::refusals::<WireError>(
        op,
        &[
            (400, "`malformed_request`: the query is not this route's."),
            (
                422,
                "`binding_invalid`: a stream key that is not one, or a conversation held by \
                 several principals (pass `principal`).",
            ),
        ],
    )
}

/// A listing page: its entries and where the next page starts.
fn listing_body() -> Schema {
    api_docs::schema(json!({
        "type": "object",
        "required": ["entries", "next"],
        "properties": {
            "entries": {"type": "array", "items": {
                "type": "object",
                "required": ["stream", "door", "principal", "id", "records", "last_activity_ms"],
                "properties": {
                    "stream": {"type": "string"},
                    "door": {"type": "string"},
                    "principal": {"type": ["string", "null"]},
                    "id": {"type": "string"},
                    "records": {"type": "integer", "minimum": 0},
                    "last_activity_ms": {"type": ["integer", "null"], "minimum": 0},
                },
            }},
            "next": {"type": ["string", "null"]},
        },
    }))
}

/// What an offline command prints, with the exit code it would end with
/// (always but on a dump, whose streamed lines start before it is known).
fn printed<'t>(op: Op<'t>, description: &str) -> Op<'t> {
    with_exit_code(op, description, true)
}

fn with_exit_code<'t>(op: Op<'t>, description: &str, always: bool) -> Op<'t> {
    let mut op = api_docs::respond(
        op,
        200,
        description,
        Some((TEXT, api_docs::schema(json!({"type": "string"})))),
    );
    if let Some(aide::openapi::ReferenceOr::Item(response)) =
        op.inner_mut().responses.as_mut().and_then(|responses| {
            responses
                .responses
                .get_mut(&aide::openapi::StatusCode::Code(200))
        })
    {
        for (name, description) in [
            (
                EXIT_CODE_HEADER,
                "The offline command's exit code: 0, or 1.",
            ),
            (
                FAILURE_HEADER,
                "With exit code 1: the sentence the command ends with.",
            ),
        ] {
            let header = aide::openapi::Header {
                description: Some(description.to_owned()),
                style: aide::openapi::HeaderStyle::Simple,
                required: always && name == EXIT_CODE_HEADER,
                deprecated: None,
                format: aide::openapi::ParameterSchemaOrContent::Schema(
                    aide::openapi::SchemaObject {
                        json_schema: api_docs::schema(json!({"type": "string"})),
                        example: None,
                        external_docs: None,
                    },
                ),
                example: None,
                examples: Default::default(),
                extensions: Default::default(),
            };
            response
                .headers
                .insert(name.to_owned(), aide::openapi::ReferenceOr::Item(header));
        }
    }
    op
}

pub(super) fn streams(op: Op<'_>) -> Op<'_> {
    let op = queried(route(op, "admin_streams", "Every stream of the log"));
    api_docs::respond(
        op,
        200,
        "A page of streams, in store order.",
        Some((JSON, listing_body())),
    )
}

pub(super) fn conversations(op: Op<'_>) -> Op<'_> {
    let op = queried(route(
        op,
        "admin_conversations",
        "The Studio's conversations",
    ));
    api_docs::respond(
        op,
        200,
        "A page of conversations, in store order.",
        Some((JSON, listing_body())),
    )
}

pub(super) fn integrity(op: Op<'_>) -> Op<'_> {
    let op = route(op, "admin_integrity", "The store's integrity");
    api_docs::json::<Integrity>(
        op,
        200,
        "How the store stands: the streams it refuses, whether it takes writes, its counters.",
    )
}

pub(super) fn dump(op: Op<'_>) -> Op<'_> {
    let op = queried(route(op, "admin_dump", "`log dump`: records as JSON lines"));
    let line = api_docs::schema(json!({"type": "string"}));
    let op = api_docs::respond(
        op,
        200,
        "One JSON object per record, as `ledgerwire log dump` prints them.",
        Some(("application/x-ndjson", line)),
    );
    with_exit_code(
        op,
        "An empty stream: what the offline command prints.",
        false,
    )
}

pub(super) fn stats(op: Op<'_>) -> Op<'_> {
    printed(
        route(op, "admin_stats", "`log stats` of the live store"),
        "What `ledgerwire log stats` prints.",
    )
}

pub(super) fn verify(op: Op<'_>) -> Op<'_> {
    printed(
        route(op, "admin_verify", "`log verify` of the live store"),
        "What `ledgerwire log verify` prints; exit code 1 names the problems found.",
    )
}

pub(super) fn replay(op: Op<'_>) -> Op<'_> {
    printed(
        queried(route(
            op,
            "admin_replay",
            "`replay`: a conversation's frames",
        )),
        "What `ledgerwire replay` prints.",
    )
}

pub(super) fn replay_check(op: Op<'_>) -> Op<'_> {
    printed(
        queried(route(
            op,
            "admin_replay_check",
            "`replay --check` against this server's agent",
        )),
        "What `ledgerwire replay --check` prints; exit code 1 when a segment differs.",
    )
}
