//! Identifier newtypes of the Studio wire.
//!
//! Every id on the wire is an opaque string the other side echoes verbatim.
//! Each gets its own type so that a question id cannot be passed where an
//! interrupt id is expected, and each is bounded because a client can send
//! any of them back to us.
//!
//! Owns: the id newtypes and their bounds. Must never: accept an id past
//! its bound.

use std::borrow::Cow;
use std::fmt;

/// Longest id the server accepts, in characters. The contract sets no
/// figure; 128 holds a UUID, a ULID or a "<requirement id>:<axis>" choice id
/// with room to spare, and keeps an id from smuggling a payload.
pub const MAX_ID_CHARS: usize = 128;

/// Why a string is not a usable id; the message is the detail a client reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("{kind} is empty; send the id exactly as the server or your client minted it")]
    Empty { kind: &'static str },
    #[error("{kind} is {len} characters long; at most {max} are accepted")]
    TooLong {
        kind: &'static str,
        len: usize,
        max: usize,
    },
    #[error("{kind} contains a control character; ids are printable text")]
    Control { kind: &'static str },
}

/// Checks the bounds every wire id shares.
fn check_id(kind: &'static str, value: &str) -> Result<(), IdError> {
    let len = value.chars().count();
    if len == 0 {
        return Err(IdError::Empty { kind });
    }
    if len > MAX_ID_CHARS {
        return Err(IdError::TooLong {
            kind,
            len,
            max: MAX_ID_CHARS,
        });
    }
    if value.chars().any(char::is_control) {
        return Err(IdError::Control { kind });
    }
    Ok(())
}

macro_rules! wire_id {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(String);

        impl $name {
            /// Wraps `value` after checking the id bounds.
            pub fn new(value: impl Into<String>) -> Result<Self, IdError> {
                let value = value.into();
                check_id($kind, &value)?;
                Ok(Self(value))
            }

            /// The id as sent on the wire.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let value = String::deserialize(deserializer)?;
                Self::new(value).map_err(serde::de::Error::custom)
            }
        }

        impl schemars::JsonSchema for $name {
            fn schema_name() -> Cow<'static, str> {
                Cow::Borrowed(stringify!($name))
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_ID_CHARS,
                    "description": concat!("Opaque ", $kind, "; echo it verbatim."),
                })
            }
        }
    };
}

wire_id!(
    /// A client-minted id, stable for one conversation (delta 5).
    ConversationId,
    "conversation_id"
);
wire_id!(
    /// The id of one pause; minted fresh per pause and echoed verbatim (delta 7).
    InterruptId,
    "interrupt_id"
);
wire_id!(
    /// A canvas component, leased by the platform to the conversation that made it.
    ComponentId,
    "component_id"
);
wire_id!(
    /// A composition manifest; optional on a mutation since delta 11.
    CompositionId,
    "composition_id"
);
wire_id!(
    /// One question of an elicitation (q1, q2, …), minted by the server.
    QuestionId,
    "question id"
);
wire_id!(
    /// An option offered by one question; scoped to that question.
    OptionId,
    "option_id"
);
wire_id!(
    /// One version of a plan.
    PlanVersionId,
    "plan_version_id"
);
wire_id!(
    /// A step of a plan, named by asks and by operations.
    PlanStepId,
    "plan step id"
);
wire_id!(
    /// A plan row's stable id: "<requirement id>:<axis>" or "decision/<slot>" (deltas 23, 24).
    ChoiceId,
    "choice_id"
);
wire_id!(
    /// One activity step within a stream.
    ActivityStepId,
    "step_id"
);
wire_id!(
    /// The trace a finished turn can be looked up by.
    TraceId,
    "trace_id"
);
