//! The wire error grammar: a closed code vocabulary times four retry modes.
//!
//! A [`WireError`] is what a refused request answers with and what a
//! stream-fatal `error` frame carries. Its JSON is flat: `code`, `retry`,
//! then `fix` only with `correct_and_retry` and `retry_after_seconds` only
//! with `retry_after_delay`, then `detail` and an optional `pointer`.
//!
//! Owns: the codes, the retry modes and each code's HTTP status. Must
//! never: make damage retryable or hide the sentence saying what to fix.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

/// The closed vocabulary of wire error codes. The platform's own grammar is
/// larger and keeps growing; [`WireError::from_upstream`] folds a code this
/// enum does not know into `transient_unavailable`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// A member is missing, malformed or out of bounds.
    BindingInvalid,
    /// The conversation, component or interrupt is not held by the server.
    NotFound,
    /// An optimistic-concurrency check failed (stale `expected_revision`,
    /// or a retried resume with a different answer).
    EditConflict,
    /// Try again later: a live segment holds the conversation, or an
    /// upstream failed (including any upstream code unknown to this enum).
    TransientUnavailable,
    /// An upstream capability refused this input (studio-side addition).
    CapabilityUnavailable,
    /// The user stopped the segment with `/cancel` (studio-side addition).
    Cancelled,
    /// The body is not JSON, or names no known `kind` (server-side addition:
    /// the contract names no code for an unreadable body).
    MalformedRequest,
    /// The body is larger than the route accepts (server-side addition).
    PayloadTooLarge,
    /// The request carries no usable bearer token (server-side addition for
    /// the contract's 401).
    Unauthorized,
    /// The path exists but not with this method (server-side addition).
    MethodNotAllowed,
    /// The body's `Content-Type` is not one the route reads (server-side
    /// addition).
    UnsupportedMediaType,
    /// The conversation's records are damaged in the store, so it cannot
    /// be served until an operator restores it (server-side addition; never
    /// retryable).
    ConversationDamaged,
}

impl ErrorCode {
    /// Every code, in declaration order.
    pub const ALL: [ErrorCode; 12] = [
        ErrorCode::BindingInvalid,
        ErrorCode::NotFound,
        ErrorCode::EditConflict,
        ErrorCode::TransientUnavailable,
        ErrorCode::CapabilityUnavailable,
        ErrorCode::Cancelled,
        ErrorCode::MalformedRequest,
        ErrorCode::PayloadTooLarge,
        ErrorCode::Unauthorized,
        ErrorCode::MethodNotAllowed,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::ConversationDamaged,
    ];

    /// The code as it appears on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BindingInvalid => "binding_invalid",
            ErrorCode::NotFound => "not_found",
            ErrorCode::EditConflict => "edit_conflict",
            ErrorCode::TransientUnavailable => "transient_unavailable",
            ErrorCode::CapabilityUnavailable => "capability_unavailable",
            ErrorCode::Cancelled => "cancelled",
            ErrorCode::MalformedRequest => "malformed_request",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ErrorCode::ConversationDamaged => "conversation_damaged",
        }
    }

    /// Reads a code by its wire name; `None` for a code outside the vocabulary.
    pub fn from_wire(code: &str) -> Option<ErrorCode> {
        ErrorCode::ALL
            .into_iter()
            .find(|known| known.as_str() == code)
    }

    /// The HTTP status a request refused with this code answers with.
    /// `cancelled` and `capability_unavailable` normally travel in a frame;
    /// their statuses are for the rare route that must answer them directly.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::MalformedRequest => 400,
            ErrorCode::Unauthorized => 401,
            ErrorCode::NotFound => 404,
            // The contract answers both a stale revision and a live segment with 409.
            ErrorCode::EditConflict | ErrorCode::TransientUnavailable | ErrorCode::Cancelled => 409,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::UnsupportedMediaType => 415,
            ErrorCode::BindingInvalid => 422,
            ErrorCode::CapabilityUnavailable => 503,
            ErrorCode::ConversationDamaged => 500,
        }
    }
}

/// The four retry modes, each with the data its JSON shape requires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Retry {
    /// A corrected call can work; `fix` says what to change.
    CorrectAndRetry { fix: String },
    /// The client's state is stale: re-read it, then retry.
    RefreshThenRetry,
    /// The same call can work after the delay.
    RetryAfterDelay { retry_after_seconds: u64 },
    /// Do not offer a retry.
    DoNotRetry,
}

/// The retry mode's name alone, as the `retry` member spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RetryMode {
    CorrectAndRetry,
    RefreshThenRetry,
    RetryAfterDelay,
    DoNotRetry,
}

impl Retry {
    /// The mode's wire name without its data.
    pub fn mode(&self) -> RetryMode {
        match self {
            Retry::CorrectAndRetry { .. } => RetryMode::CorrectAndRetry,
            Retry::RefreshThenRetry => RetryMode::RefreshThenRetry,
            Retry::RetryAfterDelay { .. } => RetryMode::RetryAfterDelay,
            Retry::DoNotRetry => RetryMode::DoNotRetry,
        }
    }
}

/// A refusal or a stream-fatal failure, as the client reads it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(into = "WireErrorJson", try_from = "WireErrorJson")]
#[error("{}: {detail}", code.as_str())]
pub struct WireError {
    pub code: ErrorCode,
    pub retry: Retry,
    /// One sentence a developer (or, in a frame, a user) can act on.
    pub detail: String,
    /// JSON Pointer (RFC 6901) of the offending member of the request body.
    pub pointer: Option<String>,
}

/// The flat JSON layout of [`WireError`]; kept private so that a
/// `correct_and_retry` without `fix` cannot be built in Rust.
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "WireError")]
struct WireErrorJson {
    code: ErrorCode,
    retry: RetryMode,
    /// How to correct the call; present exactly when `retry` is `correct_and_retry`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
    /// Seconds to wait; present exactly when `retry` is `retry_after_delay`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retry_after_seconds: Option<u64>,
    detail: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pointer: Option<String>,
}

impl From<WireError> for WireErrorJson {
    fn from(error: WireError) -> Self {
        let mode = error.retry.mode();
        let (fix, retry_after_seconds) = match error.retry {
            Retry::CorrectAndRetry { fix } => (Some(fix), None),
            Retry::RetryAfterDelay {
                retry_after_seconds,
            } => (None, Some(retry_after_seconds)),
            Retry::RefreshThenRetry | Retry::DoNotRetry => (None, None),
        };
        WireErrorJson {
            code: error.code,
            retry: mode,
            fix,
            retry_after_seconds,
            detail: error.detail,
            pointer: error.pointer,
        }
    }
}

impl TryFrom<WireErrorJson> for WireError {
    type Error = String;

    fn try_from(json: WireErrorJson) -> Result<Self, String> {
        let retry = match (json.retry, json.fix, json.retry_after_seconds) {
            (RetryMode::CorrectAndRetry, Some(fix), None) => Retry::CorrectAndRetry { fix },
            (RetryMode::RetryAfterDelay, None, Some(seconds)) => Retry::RetryAfterDelay {
                retry_after_seconds: seconds,
            },
            (RetryMode::RefreshThenRetry, None, None) => Retry::RefreshThenRetry,
            (RetryMode::DoNotRetry, None, None) => Retry::DoNotRetry,
            _ => {
                return Err("`fix` goes with correct_and_retry alone and \
                    `retry_after_seconds` with retry_after_delay alone"
                    .to_owned());
            }
        };
        Ok(WireError {
            code: json.code,
            retry,
            detail: json.detail,
            pointer: json.pointer,
        })
    }
}

impl schemars::JsonSchema for WireError {
    fn schema_name() -> Cow<'static, str> {
        WireErrorJson::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        WireErrorJson::json_schema(generator)
    }
}

impl WireError {
    /// The HTTP status of a request refused with this error.
    pub fn http_status(&self) -> u16 {
        self.code.http_status()
    }

    /// A member the client controls is wrong: 422, fix it and retry.
    pub fn binding_invalid(
        pointer: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> WireError {
        WireError {
            code: ErrorCode::BindingInvalid,
            retry: Retry::CorrectAndRetry { fix: fix.into() },
            detail: detail.into(),
            pointer: Some(pointer.into()),
        }
    }

    /// The body cannot be read as a request at all: 400.
    pub fn malformed(
        pointer: Option<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> WireError {
        WireError {
            code: ErrorCode::MalformedRequest,
            retry: Retry::CorrectAndRetry { fix: fix.into() },
            detail: detail.into(),
            pointer,
        }
    }

    /// The body is over the route's byte bound: 413.
    pub fn too_large(len_bytes: usize, max_bytes: usize) -> WireError {
        WireError {
            code: ErrorCode::PayloadTooLarge,
            retry: Retry::CorrectAndRetry {
                fix: format!("send at most {max_bytes} bytes"),
            },
            detail: format!(
                "The body is {len_bytes} bytes; this route accepts at most {max_bytes}."
            ),
            pointer: Some(String::new()),
        }
    }

    /// The conversation (or what the request names) is not held: 404.
    pub fn not_found(pointer: impl Into<String>, detail: impl Into<String>) -> WireError {
        WireError {
            code: ErrorCode::NotFound,
            retry: Retry::DoNotRetry,
            detail: detail.into(),
            pointer: Some(pointer.into()),
        }
    }

    /// A stale `expected_revision` or a resume retried with other content: 409.
    pub fn edit_conflict(pointer: impl Into<String>, detail: impl Into<String>) -> WireError {
        WireError {
            code: ErrorCode::EditConflict,
            retry: Retry::RefreshThenRetry,
            detail: detail.into(),
            pointer: Some(pointer.into()),
        }
    }

    /// Busy or failed upstream; the same call can work after the delay.
    pub fn transient(retry_after_seconds: u64, detail: impl Into<String>) -> WireError {
        WireError {
            code: ErrorCode::TransientUnavailable,
            retry: Retry::RetryAfterDelay {
                retry_after_seconds,
            },
            detail: detail.into(),
            pointer: None,
        }
    }

    /// The conversation cannot be served: its records are damaged. Never
    /// retryable; `detail` names the damage and what the operator does.
    pub fn damaged(detail: impl Into<String>) -> WireError {
        WireError {
            code: ErrorCode::ConversationDamaged,
            retry: Retry::DoNotRetry,
            detail: detail.into(),
            pointer: None,
        }
    }

    /// The stream-fatal error that ends a stream the user stopped.
    pub fn cancelled() -> WireError {
        WireError {
            code: ErrorCode::Cancelled,
            retry: Retry::DoNotRetry,
            detail: "You stopped this answer.".to_owned(),
            pointer: None,
        }
    }

    /// Maps a refusal from the platform. A code the wire vocabulary knows
    /// passes through; any other becomes `transient_unavailable`, with the
    /// upstream code and reason kept in `detail` so nothing is lost.
    pub fn from_upstream(code: &str, reason: &str, retry: Retry) -> WireError {
        match ErrorCode::from_wire(code) {
            Some(known) => WireError {
                code: known,
                retry,
                detail: reason.to_owned(),
                pointer: None,
            },
            None => WireError {
                code: ErrorCode::TransientUnavailable,
                retry: Retry::RetryAfterDelay {
                    retry_after_seconds: UPSTREAM_UNKNOWN_RETRY_AFTER_SECONDS,
                },
                detail: format!("{reason} (upstream code {code})"),
                pointer: None,
            },
        }
    }
}

/// How long a client waits before retrying a failure whose upstream code
/// the wire does not know. Ours: one SSE heartbeat interval (delta 3).
pub const UPSTREAM_UNKNOWN_RETRY_AFTER_SECONDS: u64 = 5;
