//! The `harness-sdk` commands: `turn`, `answer`, `cancel` and `mutate`,
//! each the Studio request of the same name sent on a durable lane. The
//! body is validated exactly as its Studio route validates it, refused
//! with the route's code, pointer and sentence, and applied through the
//! same decisions, so its records are the route's records. Each command
//! is keyed by its identity, so a command the host finishes again after
//! a crash starts nothing twice.
//!
//! Must never: apply half a command, accept a body that names another
//! conversation than its thread, or put a turn's frames in an answer
//! (they arrive as document operations).
//! Owns: turning each command into its Studio request and answer.

use std::sync::Arc;

use futures_util::FutureExt;
use serde_json::{Map, Value, json};

use ledgerwire_statewire::host::{AsyncHandler, Call};
use ledgerwire_statewire::packet::Rejection;
use ledgerwire_studio::auth::Principal;
use ledgerwire_studio::keyed::RequestKey;
use ledgerwire_studio::service::Studio;
use ledgerwire_studio::start::Started;
use ledgerwire_wire::{self as wire, WireError};

use super::transcript::reply_id;

// A Studio body any route accepts fits one command's parameters.
const _: () = assert!(
    wire::limits::MAX_TURN_REQUEST_BYTES + 1024
        <= ledgerwire_statewire::packet::MAX_COMMAND_PARAMS_BYTES
);

/// The commands of `harness-sdk`, by method name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// A `turn.request`: starts a turn.
    Turn,
    /// An `interrupt.response`: answers the open pause.
    Answer,
    /// A `turn.cancel`: stops the live segment.
    Cancel,
    /// A `composition.mutate`: edits the canvas.
    Mutate,
}

impl Method {
    pub const ALL: [Method; 4] = [Method::Turn, Method::Answer, Method::Cancel, Method::Mutate];

    pub fn name(self) -> &'static str {
        match self {
            Method::Turn => "turn",
            Method::Answer => "answer",
            Method::Cancel => "cancel",
            Method::Mutate => "mutate",
        }
    }

    /// The Studio request `kind` the body carries.
    pub fn kind(self) -> &'static str {
        match self {
            Method::Turn => "turn.request",
            Method::Answer => "interrupt.response",
            Method::Cancel => "turn.cancel",
            Method::Mutate => "composition.mutate",
        }
    }

    /// The handler the host runs for this method.
    pub fn handler(self, studio: Studio) -> AsyncHandler {
        Arc::new(move |call: Call| {
            let studio = studio.clone();
            async move { run(&studio, self, &call).await.map_err(rejection) }.boxed()
        })
    }
}

/// A Studio refusal as a Statewire rejection: the same code and sentence,
/// with the whole error (pointer, retry mode and its data) and the HTTP
/// status its route answers with in `data`.
pub fn rejection(error: WireError) -> Rejection {
    let status = error.http_status();
    let mut data = serde_json::to_value(&error).unwrap_or_else(|_| json!({}));
    data["status"] = json!(status);
    Rejection {
        code: error.code.as_str().to_owned(),
        message: error.detail.clone(),
        data: Some(data),
    }
}

async fn run(studio: &Studio, method: Method, call: &Call) -> Result<Value, WireError> {
    let principal = call
        .thread
        .principal()
        .map(|p| Principal::from_digest(p.as_str()))
        .ok_or_else(|| WireError::transient(60, "This thread has no principal to act for."))?;
    let key = RequestKey::new(call.key()).ok_or_else(|| {
        WireError::binding_invalid(
            "/seq",
            "The command's identity is too long.",
            "use a shorter client id",
        )
    })?;
    let body = request_body(method, call)?;
    match method {
        Method::Turn => {
            let request = wire::parse_turn_request(&body)?;
            let started = studio
                .start_turn(&principal, request, Some(&key))
                .await?
                .into_applied()?;
            Ok(started_answer(&started.into_inner(), true))
        }
        Method::Answer => {
            let response = wire::parse_interrupt_response(&body)?;
            let decision = serde_json::to_value(response.decision).unwrap_or(Value::Null);
            let started = studio
                .resume(&principal, response, Some(&key))
                .await?
                .into_applied()?;
            let mut answer = started_answer(&started.into_inner(), false);
            answer["decision"] = decision;
            Ok(answer)
        }
        Method::Cancel => {
            let request = wire::parse_cancel_request(&body)?;
            let segment = studio.cancel(&principal, &request, Some(&key)).await?;
            Ok(match segment.into_inner() {
                Some(segment) => json!({"cancelled": true, "segment": segment}),
                None => json!({"cancelled": false}),
            })
        }
        Method::Mutate => {
            let mutation = wire::parse_composition_mutation(&body)?;
            let manifest = studio.mutate(&principal, mutation, Some(&key)).await?;
            Ok(json!({"composition": manifest.into_inner()}))
        }
    }
}

/// What a started segment's answer says: the turn, the segment, its first
/// seq, the messages it writes, and the pause it answered.
fn started_answer(started: &Started, new_turn: bool) -> Value {
    let mut answer = json!({
        "turn": started.turn,
        "segment": started.segment,
        "first_seq": started.first_seq,
        "reply": reply_id(started.turn, started.segment),
    });
    if new_turn {
        answer["request"] = json!(super::transcript::request_id(started.turn));
    }
    if let Some(interrupt_id) = &started.interrupt_id {
        answer["interrupt_id"] = json!(interrupt_id);
    }
    answer
}

/// The command's one parameter as the Studio body it stands for: `kind`
/// and `conversation_id` may be left out (the method and the thread say
/// them) but, when given, must agree with them.
fn request_body(method: Method, call: &Call) -> Result<Vec<u8>, WireError> {
    let shape = || {
        WireError::malformed(
            None,
            format!(
                "{} takes one parameter, the {} body as an object.",
                method.name(),
                method.kind()
            ),
            format!("send params: [{{\"kind\": \"{}\", …}}]", method.kind()),
        )
    };
    let [Value::Object(body)] = call.params.as_slice() else {
        return Err(shape());
    };
    let mut body: Map<String, Value> = body.clone();
    let thread = call.thread.id().as_str();
    let named = body
        .get("conversation_id")
        .or_else(|| body.get("session_id"))
        .cloned();
    match named {
        None => {
            body.insert("conversation_id".into(), json!(thread));
        }
        Some(Value::String(named)) if named == thread => {}
        Some(Value::String(named)) => {
            return Err(WireError::binding_invalid(
                "/conversation_id",
                format!(
                    "This command names conversation {named:?}, but it was sent on thread {thread:?}."
                ),
                format!("send it on /threads/{named}/…, or leave conversation_id out"),
            ));
        }
        // Not a string: the Studio parser names the member at fault.
        Some(_) => {}
    }
    body.entry("kind").or_insert_with(|| json!(method.kind()));
    Ok(serde_json::to_vec(&Value::Object(body)).unwrap_or_default())
}
