//! The JSON Schema (draft 2020-12) of every request and frame.
//!
//! Owns: the schema `ledgerwire schema` prints and the clients generate
//! their types from. Must never: describe a shape the parsers refuse.

use serde_json::{Value, json};

use super::frame::Frame;
use super::request::{ReconnectRequest, StudioRequest};

/// The dialect every schema document here declares.
pub const JSON_SCHEMA_DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// One document: `$defs` holds every type; the root accepts a request or
/// a frame, and `$defs/StudioRequest` and `$defs/Frame` name each union.
pub fn schema_json() -> Value {
    let mut generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    let request = generator.subschema_for::<StudioRequest>();
    let frame = generator.subschema_for::<Frame>();
    let reconnect = generator.subschema_for::<ReconnectRequest>();
    let definitions = generator.take_definitions(true);
    json!({
        "$schema": JSON_SCHEMA_DIALECT,
        "title": "Studio wire contract v1",
        "description": "The four requests (discriminated on `kind`) and the thirteen frames \
            (discriminated on `event`) of the Studio wire, schema_version 1.",
        "oneOf": [request, frame],
        "x-ledgerwire-extensions": {
            "reconnect": {
                "route": "POST /api/studio/stream",
                "description": "ledgerwire's reconnect extension, beyond contract v1: the body \
                    below (or the Last-Event-ID header) answers an SSE stream of the \
                    conversation's current turn: its recorded frames after after_seq, then the \
                    live segment's, heartbeats while a segment (or a dead owner's lease) runs, \
                    and always a last frame that ends a stream. A turn that paused, finished or \
                    failed ends on that frame (sent again if the client has it); a segment that \
                    ended without one ends on an error frame past every seq sent: \
                    retry_after_delay (post the same interrupt.response again), \
                    refresh_then_retry (ask again with a new turn.request), or do_not_retry \
                    (code cancelled, or the conversation moved on). A damaged conversation \
                    answers or ends with code conversation_damaged, do_not_retry.",
                "request": reconnect,
                "frames": {"$ref": "#/$defs/Frame"},
            }
        },
        "$defs": definitions,
    })
}
