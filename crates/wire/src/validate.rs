//! Validation at the edge: raw body in, typed request or typed refusal out.
//!
//! Each request kind has one function. Each checks, in order: the byte
//! bound (before reading a byte of JSON), JSON syntax, the `kind`, the
//! identity spelling, the shape (serde, strict), then every bound the client
//! controls. A refusal's `pointer` names the offending member (RFC 6901)
//! and its `detail` is one sentence. Checks that need the paused frame live
//! in [`super::elicitation`].
//!
//! Owns: the parse functions. Must never: half-accept a body (a refusal
//! leaves nothing applied).

use std::collections::BTreeSet;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::composition::{CompositionMutation, CompositionOp};
use super::elicitation::{answer_missing, payload_with_answers};
use super::error::WireError;
use super::frame::{Frame, FrameEvent};
use super::limits::{
    MAX_ANSWER_TEXT_CHARS, MAX_CARD_META_CHARS, MAX_LAYOUT_HINTS_BYTES, MAX_MESSAGE_CHARS,
    MAX_MUTATION_OPS, MAX_PAYLOAD_CHARS, MAX_QUESTIONS, MAX_REORDER_IDS, MAX_REQUEST_BYTES,
    MAX_TURN_REQUEST_BYTES,
};
use super::pointer::pointer_token;
use super::request::{
    Answer, CancelRequest, ComponentIntent, Decision, InterruptResponse, RequestKind,
    StudioRequest, TurnRequest,
};
use super::seed::{MAX_SEEDS, SeedSpec};

/// Largest frame [`parse_frame`] reads, in bytes. Ours: a component's
/// payload holds its points; 8 MiB holds a chart of some 100,000.
pub const MAX_FRAME_BYTES: usize = 8 * 1024 * 1024;

/// The byte bound of a request kind's route.
pub fn max_body_bytes(kind: RequestKind) -> usize {
    match kind {
        RequestKind::Turn => MAX_TURN_REQUEST_BYTES,
        RequestKind::InterruptResponse | RequestKind::CompositionMutate | RequestKind::Cancel => {
            MAX_REQUEST_BYTES
        }
    }
}

/// Parses a body of any kind (for a single endpoint taking them all).
pub fn parse_request(body: &[u8]) -> Result<StudioRequest, WireError> {
    let mut object = read_object(body, MAX_TURN_REQUEST_BYTES)?;
    let kind = take_kind(&mut object, None)?;
    check_size(body, max_body_bytes(kind))?;
    typed_request(kind, object)
}

/// `POST /api/studio/turn`.
pub fn parse_turn_request(body: &[u8]) -> Result<TurnRequest, WireError> {
    match parse_route(body, RequestKind::Turn)? {
        StudioRequest::Turn(request) => Ok(request),
        other => Err(wrong_kind(other.kind(), RequestKind::Turn)),
    }
}

/// `POST /api/studio/interrupt`. The checks against the paused frame follow
/// with [`super::elicitation::PendingInterrupt::validate`].
pub fn parse_interrupt_response(body: &[u8]) -> Result<InterruptResponse, WireError> {
    match parse_route(body, RequestKind::InterruptResponse)? {
        StudioRequest::InterruptResponse(request) => Ok(request),
        other => Err(wrong_kind(other.kind(), RequestKind::InterruptResponse)),
    }
}

/// `POST /api/studio/composition`.
pub fn parse_composition_mutation(body: &[u8]) -> Result<CompositionMutation, WireError> {
    match parse_route(body, RequestKind::CompositionMutate)? {
        StudioRequest::CompositionMutate(request) => Ok(request),
        other => Err(wrong_kind(other.kind(), RequestKind::CompositionMutate)),
    }
}

/// `POST /api/studio/cancel`.
pub fn parse_cancel_request(body: &[u8]) -> Result<CancelRequest, WireError> {
    match parse_route(body, RequestKind::Cancel)? {
        StudioRequest::Cancel(request) => Ok(request),
        other => Err(wrong_kind(other.kind(), RequestKind::Cancel)),
    }
}

/// Parses one frame's JSON (a client's view; the server only writes them).
pub fn parse_frame(data: &[u8]) -> Result<Frame, WireError> {
    check_size(data, MAX_FRAME_BYTES)?;
    // Fast path: a well-formed frame is read straight from the bytes. Only
    // a refused one pays for the slower pass that names the member at fault.
    if let Ok(frame) = serde_json::from_slice::<Frame>(data) {
        return Ok(frame);
    }
    let object = read_object(data, MAX_FRAME_BYTES)?;
    match object.get("event") {
        Some(Value::String(event)) if FrameEvent::from_wire(event).is_some() => {}
        Some(Value::String(event)) => {
            return Err(WireError::malformed(
                Some("/event".to_owned()),
                format!("Unknown event `{event}`; contract v1 has thirteen frames."),
                "read only the events the contract names",
            ));
        }
        _ => {
            return Err(WireError::malformed(
                Some("/event".to_owned()),
                "A frame needs a string `event`.",
                "send the frame's event name",
            ));
        }
    }
    deserialize(Value::Object(object))
}

fn parse_route(body: &[u8], kind: RequestKind) -> Result<StudioRequest, WireError> {
    let mut object = read_object(body, max_body_bytes(kind))?;
    take_kind(&mut object, Some(kind))?;
    typed_request(kind, object)
}

fn check_size(body: &[u8], max_bytes: usize) -> Result<(), WireError> {
    if body.len() > max_bytes {
        return Err(WireError::too_large(body.len(), max_bytes));
    }
    Ok(())
}

/// The size bound, then JSON syntax, then an object at the top.
fn read_object(body: &[u8], max_bytes: usize) -> Result<Map<String, Value>, WireError> {
    check_size(body, max_bytes)?;
    let value: Value = serde_json::from_slice(body).map_err(|error| {
        WireError::malformed(
            Some(String::new()),
            format!("The body is not JSON: {error}."),
            "send one JSON object",
        )
    })?;
    match value {
        Value::Object(object) => Ok(object),
        _ => Err(WireError::malformed(
            Some(String::new()),
            "The body is JSON but not an object.",
            "send one JSON object with a `kind`",
        )),
    }
}

/// Removes and checks `kind`; with `expected`, the route's own kind.
fn take_kind(
    object: &mut Map<String, Value>,
    expected: Option<RequestKind>,
) -> Result<RequestKind, WireError> {
    let kinds = RequestKind::ALL.map(RequestKind::as_str).join(", ");
    let kind = match object.remove("kind") {
        Some(Value::String(kind)) => RequestKind::from_wire(&kind).ok_or_else(|| {
            WireError::malformed(
                Some("/kind".to_owned()),
                format!("Unknown kind `{kind}`; the Studio takes {kinds}."),
                "send one of the four request kinds",
            )
        })?,
        Some(_) | None => {
            return Err(WireError::malformed(
                Some("/kind".to_owned()),
                format!("A request needs a string `kind`: one of {kinds}."),
                "add the request's kind",
            ));
        }
    };
    match expected {
        Some(expected) if expected != kind => Err(wrong_kind(kind, expected)),
        _ => Ok(kind),
    }
}

fn wrong_kind(found: RequestKind, expected: RequestKind) -> WireError {
    WireError::malformed(
        Some("/kind".to_owned()),
        format!(
            "This route takes `{}`; post `{}` to {}.",
            expected.as_str(),
            found.as_str(),
            found.route()
        ),
        format!("post the body to {}", found.route()),
    )
}

/// Refuses a body spelling the conversation id both ways (delta 5).
fn check_identity(object: &Map<String, Value>) -> Result<(), WireError> {
    if object.contains_key("conversation_id") && object.contains_key("session_id") {
        return Err(WireError::binding_invalid(
            "/session_id",
            "The body carries both conversation_id and its deprecated alias session_id.",
            "send conversation_id alone",
        ));
    }
    Ok(())
}

fn typed_request(
    kind: RequestKind,
    object: Map<String, Value>,
) -> Result<StudioRequest, WireError> {
    check_identity(&object)?;
    let body = Value::Object(object);
    let request = match kind {
        RequestKind::Turn => StudioRequest::Turn(deserialize(body)?),
        RequestKind::InterruptResponse => StudioRequest::InterruptResponse(deserialize(body)?),
        RequestKind::CompositionMutate => StudioRequest::CompositionMutate(deserialize(body)?),
        RequestKind::Cancel => StudioRequest::Cancel(deserialize(body)?),
    };
    check_bounds(&request)?;
    Ok(request)
}

/// Every semantic bound of a typed request.
pub fn check_bounds(request: &StudioRequest) -> Result<(), WireError> {
    match request {
        StudioRequest::Turn(turn) => check_turn(turn),
        StudioRequest::InterruptResponse(response) => check_interrupt_response(response),
        StudioRequest::CompositionMutate(mutation) => check_mutation(mutation),
        StudioRequest::Cancel(_) => Ok(()),
    }
}

fn check_turn(turn: &TurnRequest) -> Result<(), WireError> {
    check_text("/message", &turn.message, MAX_MESSAGE_CHARS, "the message")?;
    if let Some(SeedSpec::Seeds(seeds)) = &turn.seed_spec
        && (seeds.is_empty() || seeds.len() > MAX_SEEDS)
    {
        return Err(WireError::binding_invalid(
            "/seed_spec",
            format!(
                "seed_spec holds {} seeds; a seeded turn carries 1 to {MAX_SEEDS}.",
                seeds.len()
            ),
            format!("send 1 to {MAX_SEEDS} seeds, or omit seed_spec"),
        ));
    }
    let edits = turn
        .component_ref
        .as_ref()
        .is_some_and(|reference| reference.intent == ComponentIntent::Edit);
    if edits && turn.seed_spec.is_some() {
        return Err(WireError::binding_invalid(
            "/component_ref/intent",
            "A seeded turn cannot edit a card.",
            "drop seed_spec, or use intent follow_up",
        ));
    }
    Ok(())
}

fn check_interrupt_response(response: &InterruptResponse) -> Result<(), WireError> {
    if let Some(payload) = &response.payload {
        check_length("/payload", payload, MAX_PAYLOAD_CHARS)?;
    }
    if let Some(answers) = &response.answers {
        if answers.len() > MAX_QUESTIONS {
            return Err(WireError::binding_invalid(
                "/answers",
                format!(
                    "{} answers; an elicitation asks at most {MAX_QUESTIONS} questions.",
                    answers.len()
                ),
                "answer exactly the question ids of the frame",
            ));
        }
        for (question, answer) in answers {
            if let Answer::Text { text } = answer {
                let pointer = format!("/answers/{}/text", pointer_token(question.as_str()));
                check_text(&pointer, text, MAX_ANSWER_TEXT_CHARS, "a text answer")?;
            }
        }
    }
    check_decision_members(response)
}

/// The decision-specific rules a body shows on its own.
fn check_decision_members(response: &InterruptResponse) -> Result<(), WireError> {
    let has_payload = response.payload.is_some();
    let has_answers = response.answers.is_some();
    match response.decision {
        Decision::Approve | Decision::Reject | Decision::Amend if has_answers => {
            Err(WireError::binding_invalid(
                "/answers",
                "answers belong to an elicitation; a plan decision takes none.",
                "drop answers, or decide 'answer' on an elicitation",
            ))
        }
        _ if response.switch.is_some() && response.decision != Decision::Amend => {
            Err(WireError::binding_invalid(
                "/switch",
                "A switch is an amendment of the plan; it goes with decision 'amend'.",
                "decide 'amend' to switch a choice, or drop switch",
            ))
        }
        Decision::Amend => match (&response.payload, &response.switch) {
            (Some(_), Some(_)) => Err(WireError::binding_invalid(
                "/switch",
                "An amendment carries payload (the user's text) or switch, not both.",
                "send the switch alone, or the amendment text alone",
            )),
            (Some(payload), None) => {
                check_text("/payload", payload, MAX_PAYLOAD_CHARS, "the amendment")
            }
            (None, Some(_)) => Ok(()),
            (None, None) => Err(WireError::binding_invalid(
                "/payload",
                "decision 'amend' requires payload, the amendment text, or switch.",
                "put the user's amendment in payload, or the picked option in switch",
            )),
        },
        Decision::Answer if has_answers && has_payload => Err(payload_with_answers()),
        Decision::Answer if !has_answers && !has_payload => Err(answer_missing()),
        Decision::Skip if has_answers || has_payload => Err(WireError::binding_invalid(
            if has_answers { "/answers" } else { "/payload" },
            "A skip dismisses the whole pause and carries neither answers nor payload.",
            "drop answers and payload, or answer with decision 'answer'",
        )),
        Decision::Approve | Decision::Reject | Decision::Answer | Decision::Skip => Ok(()),
    }
}

fn check_mutation(mutation: &CompositionMutation) -> Result<(), WireError> {
    if mutation.ops.is_empty() || mutation.ops.len() > MAX_MUTATION_OPS {
        return Err(WireError::binding_invalid(
            "/ops",
            format!(
                "ops holds {} operations; a mutation applies 1 to {MAX_MUTATION_OPS}.",
                mutation.ops.len()
            ),
            format!("send 1 to {MAX_MUTATION_OPS} operations"),
        ));
    }
    for (index, op) in mutation.ops.iter().enumerate() {
        check_op(&format!("/ops/{index}"), op)?;
    }
    Ok(())
}

fn check_op(at: &str, op: &CompositionOp) -> Result<(), WireError> {
    match op {
        CompositionOp::Reorder { order } => check_order(&format!("{at}/order"), order),
        CompositionOp::SetLayoutHints { layout_hints } => {
            let bytes = serde_json::to_vec(layout_hints).map_or(usize::MAX, |json| json.len());
            if bytes > MAX_LAYOUT_HINTS_BYTES {
                return Err(WireError::binding_invalid(
                    format!("{at}/layout_hints"),
                    format!(
                        "layout_hints is {bytes} bytes; at most {MAX_LAYOUT_HINTS_BYTES} are kept."
                    ),
                    "keep layout hints to a few presentation settings",
                ));
            }
            Ok(())
        }
        CompositionOp::SetCardMeta { meta, .. } => {
            for (field, text) in meta.fields() {
                if let Some(text) = text {
                    check_length(&format!("{at}/meta/{field}"), text, MAX_CARD_META_CHARS)?;
                }
            }
            Ok(())
        }
        CompositionOp::Add { .. }
        | CompositionOp::Remove { .. }
        | CompositionOp::Pin { .. }
        | CompositionOp::Unpin { .. } => Ok(()),
    }
}

fn check_order(at: &str, order: &[super::ids::ComponentId]) -> Result<(), WireError> {
    if order.len() > MAX_REORDER_IDS {
        return Err(WireError::binding_invalid(
            at,
            format!(
                "order names {} components; at most {MAX_REORDER_IDS} are accepted.",
                order.len()
            ),
            "name each block of the canvas once",
        ));
    }
    let mut seen = BTreeSet::new();
    for (index, id) in order.iter().enumerate() {
        if !seen.insert(id) {
            return Err(WireError::binding_invalid(
                format!("{at}/{index}"),
                format!("order names component `{id}` twice."),
                "name each block of the canvas once",
            ));
        }
    }
    Ok(())
}

/// Non-blank and within `max_chars`.
fn check_text(pointer: &str, text: &str, max_chars: usize, what: &str) -> Result<(), WireError> {
    if text.trim().is_empty() {
        return Err(WireError::binding_invalid(
            pointer,
            format!("{} is empty.", capitalize(what)),
            format!("send {what} as non-blank text"),
        ));
    }
    check_length(pointer, text, max_chars)
}

fn check_length(pointer: &str, text: &str, max_chars: usize) -> Result<(), WireError> {
    let chars = text.chars().count();
    if chars > max_chars {
        return Err(WireError::binding_invalid(
            pointer,
            format!("{pointer} is {chars} characters long; at most {max_chars} are accepted."),
            format!("shorten it to {max_chars} characters"),
        ));
    }
    Ok(())
}

fn capitalize(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Serde with the path of the failing member kept, as a 422.
fn deserialize<T: DeserializeOwned>(value: Value) -> Result<T, WireError> {
    serde_path_to_error::deserialize(value).map_err(|error| {
        let mut pointer = path_pointer(error.path());
        let message = error.inner().to_string();
        let detail = shape_detail(&message, &mut pointer);
        WireError::binding_invalid(pointer, detail, "send the member as the contract shapes it")
    })
}

fn path_pointer(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    path.iter()
        .filter_map(|segment| match segment {
            Segment::Seq { index } => Some(index.to_string()),
            Segment::Map { key } => Some(pointer_token(key)),
            Segment::Enum { .. } | Segment::Unknown => None,
        })
        .fold(String::new(), |pointer, token| pointer + "/" + &token)
}

/// Turns serde's message into one sentence; for a missing or unknown
/// member, extends `pointer` to name the member itself.
fn shape_detail(message: &str, pointer: &mut String) -> String {
    if let Some(member) = quoted_after(message, "missing field `") {
        extend_pointer(pointer, member);
        return format!("The member `{member}` is required here.");
    }
    if let Some(member) = quoted_after(message, "unknown field `") {
        extend_pointer(pointer, member);
        let expected = message
            .split_once(", expected ")
            .map_or("", |(_, rest)| rest);
        return format!(
            "Unknown member `{member}`; requests are read strictly (expected {expected})."
        );
    }
    let message = message.trim_end_matches('.');
    if pointer.is_empty() {
        format!("The body is invalid: {message}.")
    } else {
        format!("Member {pointer} is invalid: {message}.")
    }
}

fn quoted_after<'a>(message: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = message.strip_prefix(prefix)?;
    rest.split_once('`').map(|(member, _)| member)
}

fn extend_pointer(pointer: &mut String, member: &str) {
    let token = pointer_token(member);
    if !pointer.ends_with(&format!("/{token}")) {
        pointer.push('/');
        pointer.push_str(&token);
    }
}
