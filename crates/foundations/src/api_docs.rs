//! The words every door uses to describe its routes to the OpenAPI
//! document (`server::openapi` assembles it): responses with their media
//! type and schema, parameters, request bodies and the security scheme an
//! operation needs. Schemas come from the Rust types the routes use,
//! through aide's schema generator, so they land in
//! `#/components/schemas` by name.
//!
//! Owns: these helpers over aide's `TransformOperation`.
//! Must never: route, serve or decide anything; a door says what its
//! routes answer, this module only writes it down.

use aide::generate::in_context;
use aide::openapi::{
    HeaderStyle, MediaType, Operation, Parameter, ParameterData, ParameterSchemaOrContent,
    PathStyle, QueryStyle, ReferenceOr, RequestBody, Response, SchemaObject, StatusCode,
};
use aide::transform::TransformOperation;
use schemars::{JsonSchema, Schema};

/// The security scheme of the doors' bearer token (`STUDIO_API_TOKEN`).
pub const BEARER_SCHEME: &str = "bearer";
/// The security scheme of the audit API's operator token.
pub const OPERATOR_SCHEME: &str = "operator";

/// The media type of a server-sent event stream.
pub const EVENT_STREAM: &str = "text/event-stream";
/// The media type of a JSON body.
pub const JSON: &str = "application/json";

/// The schema of `T`: a reference into the components when `T` is named.
pub fn schema_of<T: JsonSchema>() -> Schema {
    in_context(|ctx| ctx.schema.subschema_for::<T>())
}

/// A schema written out where no Rust type carries the shape (a body built
/// as JSON in the handler). Panics only on a literal that is no schema.
pub fn schema(value: serde_json::Value) -> Schema {
    Schema::try_from(value).expect("a literal JSON Schema")
}

fn object(schema: Schema) -> SchemaObject {
    SchemaObject {
        json_schema: schema,
        example: None,
        external_docs: None,
    }
}

fn operation<'a>(op: &'a mut TransformOperation<'_>) -> &'a mut Operation {
    op.inner_mut()
}

/// Adds `content` (media type and schema; none for an empty body) to the
/// response for `status`, creating it with `description` if missing.
pub fn respond<'t>(
    mut op: TransformOperation<'t>,
    status: u16,
    description: &str,
    content: Option<(&str, Schema)>,
) -> TransformOperation<'t> {
    let responses = operation(&mut op)
        .responses
        .get_or_insert_with(Default::default);
    let entry = responses
        .responses
        .entry(StatusCode::Code(status))
        .or_insert_with(|| {
            ReferenceOr::Item(Response {
                description: description.to_owned(),
                ..Default::default()
            })
        });
    if let (ReferenceOr::Item(response), Some((media_type, schema))) = (entry, content) {
        response.content.insert(
            media_type.to_owned(),
            MediaType {
                schema: Some(object(schema)),
                ..Default::default()
            },
        );
    }
    op
}

/// A JSON response of type `T`.
pub fn json<'t, T: JsonSchema>(
    op: TransformOperation<'t>,
    status: u16,
    description: &str,
) -> TransformOperation<'t> {
    respond(op, status, description, Some((JSON, schema_of::<T>())))
}

/// An SSE response whose every event's `data` is one `T` in JSON. In
/// OpenAPI 3.1 a `text/event-stream` schema describes one event (as 3.2's
/// `itemSchema` does): its `id`, its `event` and its `data`, a string
/// holding JSON per `contentSchema`.
pub fn event_stream<'t, T: JsonSchema>(
    op: TransformOperation<'t>,
    status: u16,
    description: &str,
) -> TransformOperation<'t> {
    let data = schema_of::<T>();
    let event = schema(serde_json::json!({
        "type": "object",
        "required": ["data"],
        "properties": {
            "id": {"type": "string"},
            "event": {"type": "string", "const": "message"},
            "data": {
                "type": "string",
                "contentMediaType": JSON,
                "contentSchema": data,
            },
        },
    }));
    respond(op, status, description, Some((EVENT_STREAM, event)))
}

/// JSON refusals of type `E`, one response per `(status, description)`.
pub fn refusals<'t, E: JsonSchema>(
    mut op: TransformOperation<'t>,
    statuses: &[(u16, &str)],
) -> TransformOperation<'t> {
    for (status, description) in statuses {
        op = json::<E>(op, *status, description);
    }
    op
}

/// Requires the security scheme `scheme` (see [`BEARER_SCHEME`]).
pub fn secured<'t>(op: TransformOperation<'t>, scheme: &str) -> TransformOperation<'t> {
    op.security_requirement(scheme)
}

/// Makes the security requirements optional: the credentials may come
/// another way than the request's headers (a WebSocket's first message).
pub fn security_optional(mut op: TransformOperation<'_>) -> TransformOperation<'_> {
    operation(&mut op).security.push(Default::default());
    op
}

fn parameter_data(name: &str, required: bool, description: &str, schema: Schema) -> ParameterData {
    ParameterData {
        name: name.to_owned(),
        description: Some(description.to_owned()),
        required,
        deprecated: None,
        format: ParameterSchemaOrContent::Schema(object(schema)),
        example: None,
        examples: Default::default(),
        explode: None,
        extensions: Default::default(),
    }
}

fn add_parameter<'t>(
    mut op: TransformOperation<'t>,
    parameter: Parameter,
) -> TransformOperation<'t> {
    operation(&mut op)
        .parameters
        .push(ReferenceOr::Item(parameter));
    op
}

/// A request header.
pub fn header<'t>(
    op: TransformOperation<'t>,
    name: &str,
    required: bool,
    description: &str,
    schema: Schema,
) -> TransformOperation<'t> {
    let parameter = Parameter::Header {
        parameter_data: parameter_data(name, required, description, schema),
        style: HeaderStyle::Simple,
    };
    add_parameter(op, parameter)
}

/// A path parameter (`{name}` in the route), a string.
pub fn path_parameter<'t>(
    op: TransformOperation<'t>,
    name: &str,
    description: &str,
    schema: Schema,
) -> TransformOperation<'t> {
    let parameter = Parameter::Path {
        parameter_data: parameter_data(name, true, description, schema),
        style: PathStyle::Simple,
    };
    add_parameter(op, parameter)
}

/// A query parameter.
pub fn query_parameter<'t>(
    op: TransformOperation<'t>,
    name: &str,
    required: bool,
    description: &str,
    schema: Schema,
) -> TransformOperation<'t> {
    let parameter = Parameter::Query {
        parameter_data: parameter_data(name, required, description, schema),
        allow_reserved: false,
        style: QueryStyle::Form,
        allow_empty_value: None,
    };
    add_parameter(op, parameter)
}

/// The request body: these media types, each with `schema`.
pub fn body<'t>(
    mut op: TransformOperation<'t>,
    media_types: &[&str],
    required: bool,
    schema: &Schema,
) -> TransformOperation<'t> {
    let content = media_types
        .iter()
        .map(|media_type| {
            let media = MediaType {
                schema: Some(object(schema.clone())),
                ..Default::default()
            };
            ((*media_type).to_owned(), media)
        })
        .collect();
    operation(&mut op).request_body = Some(ReferenceOr::Item(RequestBody {
        description: None,
        content,
        required,
        extensions: Default::default(),
    }));
    op
}

/// No request body (a handler that reads raw bytes suggests one to aide).
pub fn no_body(mut op: TransformOperation<'_>) -> TransformOperation<'_> {
    operation(&mut op).request_body = None;
    op
}
