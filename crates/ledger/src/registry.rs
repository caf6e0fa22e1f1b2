//! The registry of every kind a binary knows: the ledger's own and the
//! ones each door adds, by code, for the tools that show any stored
//! payload as JSON (`log dump`, `replay`, the audit API).
//!
//! Owns: [`KindRegistry`] and [`DecodeError`]. Must never: name a door or
//! import a door's types (the binary hands it their [`KindEntry`]s), or
//! refuse to show a record: an unknown kind is an error the caller
//! prints, not a panic.

use std::collections::BTreeMap;

use crate::kinds::{Kind, KindEntry, nest_json_text};
use crate::record::Record;

/// Every kind a binary knows, by code.
#[derive(Clone, Default)]
pub struct KindRegistry {
    entries: BTreeMap<u16, KindEntry>,
}

impl KindRegistry {
    /// A registry of the ledger's own kinds (the diagnostic probe).
    pub fn new() -> Self {
        Self::default().with(crate::probe::KINDS)
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
