//! The JSON Schema (draft 2020-12) of every request and frame.

use serde_json::{Value, json};

use super::frame::Frame;
use super::request::StudioRequest;

/// The dialect every schema document here declares.
pub const JSON_SCHEMA_DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// One document: `$defs` holds every type; the root accepts a request or
/// a frame, and `$defs/StudioRequest` and `$defs/Frame` name each union.
pub fn schema_json() -> Value {
    let mut generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    let request = generator.subschema_for::<StudioRequest>();
    let frame = generator.subschema_for::<Frame>();
    let definitions = generator.take_definitions(true);
    json!({
        "$schema": JSON_SCHEMA_DIALECT,
        "title": "Studio wire contract v1",
        "description": "The four requests (discriminated on `kind`) and the thirteen frames \
            (discriminated on `event`) of the Studio wire, schema_version 1.",
        "oneOf": [request, frame],
        "$defs": definitions,
    })
}
