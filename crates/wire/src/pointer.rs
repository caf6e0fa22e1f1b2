//! How a refusal names the member it refuses: a JSON Pointer (RFC 6901),
//! built one reference token at a time.
//!
//! Owns: the escaping of a reference token. Must never: decide what is
//! refused (that is [`super::validate`] and [`super::elicitation`]), or
//! hand out a pointer whose tokens were not escaped.

/// Escapes one reference token of a JSON Pointer (RFC 6901 §3).
pub fn pointer_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}
