//! Keyed requests: a request that must apply at most once per
//! conversation (a Statewire command's identity) carries a key; a repeat
//! is answered the first outcome, read back from the record that applied
//! it.
//!
//! Owns: the key's bounds and the two ways a keyed request comes out.
//! Must never: apply anything for a repeated key, or answer a repeat
//! with anything but what its record holds.

use ledgerwire_wire::WireError;

/// Longest request key, in bytes.
pub const MAX_REQUEST_KEY_BYTES: usize = 256;

/// The key of a request that must apply at most once per conversation
/// (a Statewire command's identity): repeating it answers the first
/// outcome and applies nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestKey(String);

impl RequestKey {
    /// `None` for an empty key or one over [`MAX_REQUEST_KEY_BYTES`].
    pub fn new(key: impl Into<String>) -> Option<Self> {
        let key = key.into();
        (!key.is_empty() && key.len() <= MAX_REQUEST_KEY_BYTES).then_some(Self(key))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// How a keyed request came out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Applied<T> {
    /// This request applied it.
    Now(T),
    /// An earlier request with the same key did; this is what it was
    /// answered.
    Before(T),
}

impl<T> Applied<T> {
    pub fn into_inner(self) -> T {
        match self {
            Applied::Now(value) | Applied::Before(value) => value,
        }
    }
}

impl<T: serde::de::DeserializeOwned> Applied<T> {
    pub(super) fn read(decided: Decided<T>) -> Result<Self, WireError> {
        match decided {
            Decided::Now(value) => Ok(Applied::Now(value)),
            Decided::Before(outcome) => serde_json::from_str(&outcome)
                .map(Applied::Before)
                .map_err(|_| {
                    WireError::transient(
                        3600,
                        "This request's earlier outcome cannot be read back; an operator must look at the conversation.",
                    )
                }),
        }
    }
}

/// How a decision came out.
pub(super) enum Decided<T> {
    /// Its records were appended (or it needed none).
    Now(T),
    /// A request with the same key was applied before: its outcome.
    Before(String),
}
