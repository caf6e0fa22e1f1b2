//! Record kinds: the number and name of each kind of payload, and the
//! registry that turns any stored payload into JSON for the tools.
//!
//! The ledger owns the mechanism, not the vocabulary: each door declares
//! its own kinds (the Studio's in `studio::records`, Statewire's in
//! `statewire::records`) and the binary assembles them into one
//! [`KindRegistry`] for `log dump`, `replay` and the audit API.
//!
//! Rules (log-format/LOG-FORMAT.md, "Evolving record kinds"): a kind's
//! number is never reused and its payload type never changes once a build
//! wrote it. A new shape is a new kind; old kinds stay decodable forever.
//! Must never: name a door or import a door's types.

use std::collections::BTreeMap;

use serde::{Serialize, de::DeserializeOwned};

use crate::ledger::record::{NewRecord, Record};

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
    decode: fn(&Record) -> Result<serde_json::Value, postcard::Error>,
    /// Members kept as JSON text (a frame, a request, an answer), shown
    /// as the JSON they hold.
    json_text_members: JsonTextMembers,
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

/// Every kind a binary knows, by code.
#[derive(Clone, Default)]
pub struct KindRegistry {
    entries: BTreeMap<u16, KindEntry>,
}

impl KindRegistry {
    /// A registry of the ledger's own kinds (the diagnostic probe).
    pub fn new() -> Self {
        Self::default().with(crate::ledger::probe::KINDS)
    }

    /// Adds a door's kinds. Two kinds with one code are a bug of the
    /// binary's assembly, found by its first test: it panics.
    pub fn with(mut self, entries: &[KindEntry]) -> Self {
        for entry in entries {
            let previous = self.entries.insert(entry.kind.code, *entry);
            assert!(
                previous.is_none(),
                "record kind {} is registered twice",
                entry.kind.code
            );
        }
        self
    }

    /// The kind's name, if this binary knows the code.
    pub fn name(&self, code: u16) -> Option<&'static str> {
        self.entries.get(&code).map(|entry| entry.kind.name)
    }

    /// Every registered kind, by code.
    pub fn kinds(&self) -> impl Iterator<Item = Kind> + '_ {
        self.entries.values().map(|entry| entry.kind)
    }

    /// Decodes a record's payload into JSON, by kind. Members the record
    /// keeps as JSON text (a frame, a request, an answer) are shown as the
    /// JSON they hold, not as strings.
    pub fn payload_json(&self, record: &Record) -> Result<serde_json::Value, DecodeError> {
        let entry = self.entry(record)?;
        let mut payload = Self::decode(entry, record)?;
        for path in entry.json_text_members {
            nest_json_text(&mut payload, path);
        }
        Ok(payload)
    }

    /// Decodes a record's payload into JSON with its JSON text members
    /// kept as the exact text the log holds.
    pub fn payload_json_as_stored(
        &self,
        record: &Record,
    ) -> Result<serde_json::Value, DecodeError> {
        Self::decode(self.entry(record)?, record)
    }

    fn entry(&self, record: &Record) -> Result<&KindEntry, DecodeError> {
        self.entries
            .get(&record.kind())
            .ok_or(DecodeError::UnknownKind(record.kind()))
    }

    fn decode(entry: &KindEntry, record: &Record) -> Result<serde_json::Value, DecodeError> {
        (entry.decode)(record).map_err(|error| DecodeError::Payload {
            kind: entry.kind.name,
            error,
        })
    }
}

/// Why a payload could not be shown as JSON.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("record kind {0} is unknown to this build (written by a newer ledgerwire?)")]
    UnknownKind(u16),
    #[error("payload of kind {kind} does not decode: {error}")]
    Payload {
        kind: &'static str,
        error: postcard::Error,
    },
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
