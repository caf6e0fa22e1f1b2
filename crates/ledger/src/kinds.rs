//! Record kinds: the number and name of each kind of payload, and how a
//! stored payload of a kind is shown as JSON for the tools.
//!
//! The ledger owns the mechanism, not the vocabulary: each door declares
//! its own kinds (the Studio's in `studio::records`, Statewire's in
//! `statewire::records`) and the binary assembles them into one
//! [`KindRegistry`](crate::KindRegistry) for `log dump`, `replay`
//! and the audit API.
//!
//! Rules (log-format/LOG-FORMAT.md, "Evolving record kinds"): a kind's
//! number is never reused and its payload type never changes once a build
//! wrote it. A new shape is a new kind; old kinds stay decodable forever.
//! Must never: name a door or import a door's types.

use serde::{Serialize, de::DeserializeOwned};

use crate::record::{NewRecord, Record};

/// A record kind: the number stored in every record's header and the
/// name the tools print. Codes are handed out in ranges by owner: 1–15
/// the ledger's own, 16–63 the Studio's, 64–127 Statewire's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Kind {
    pub code: u16,
    pub name: &'static str,
}

impl Kind {
    pub const fn new(code: u16, name: &'static str) -> Self {
        Self { code, name }
    }
}

/// A payload type bound to its record kind.
pub trait Payload: Serialize + DeserializeOwned {
    const KIND: Kind;

    /// Encodes the payload as a record to append.
    fn to_record(&self) -> NewRecord {
        NewRecord {
            kind: Self::KIND.code,
            // Serialising plain data into a Vec cannot fail.
            payload: postcard::to_allocvec(self).unwrap_or_default(),
        }
    }

    /// Decodes a record of this kind; `None` if the record is another kind.
    fn from_record(record: &Record) -> Option<Result<Self, postcard::Error>> {
        (record.kind() == Self::KIND.code).then(|| postcard::from_bytes(record.payload()))
    }
}

/// Paths of members that hold JSON text, as member names (`*`: every
/// element of an array).
pub type JsonTextMembers = &'static [&'static [&'static str]];

/// One kind as the registry knows it: how to show its payload as JSON.
#[derive(Clone, Copy)]
pub struct KindEntry {
    pub kind: Kind,
    pub(crate) decode: fn(&Record) -> Result<serde_json::Value, postcard::Error>,
    /// Members kept as JSON text (a frame, a request, an answer), shown
    /// as the JSON they hold.
    pub(crate) json_text_members: JsonTextMembers,
}

impl KindEntry {
    /// The entry of payload type `T`.
    pub const fn of<T: Payload>(json_text_members: JsonTextMembers) -> Self {
        Self {
            kind: T::KIND,
            decode: decode_json::<T>,
            json_text_members,
        }
    }
}

/// Replaces the string at `path` in `value` by the JSON it holds; leaves
/// it a string if it is not JSON (a record is shown, never refused).
/// `path` names object members, array indexes, or `*` for every element.
pub fn nest_json_text(value: &mut serde_json::Value, path: &[&str]) {
    use serde_json::Value;
    match path.split_first() {
        None => {
            if let Value::String(text) = value
                && let Ok(nested) = serde_json::from_str::<Value>(text)
            {
                *value = nested;
            }
        }
        Some((&"*", rest)) => {
            if let Value::Array(items) = value {
                items.iter_mut().for_each(|item| nest_json_text(item, rest));
            }
        }
        Some((member, rest)) => {
            let inner = match member.parse::<usize>() {
                Ok(index) if value.is_array() => value.get_mut(index),
                _ => value.get_mut(*member),
            };
            if let Some(inner) = inner {
                nest_json_text(inner, rest);
            }
        }
    }
}

fn decode_json<T: Payload>(record: &Record) -> Result<serde_json::Value, postcard::Error> {
    let value: T = postcard::from_bytes(record.payload())?;
    Ok(serde_json::to_value(value).unwrap_or(serde_json::Value::Null))
}
