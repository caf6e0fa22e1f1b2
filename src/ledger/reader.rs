//! Reading one stream in position order: from the records this process
//! appended lately when they cover the read, from sled otherwise.
//!
//! Owns: `StreamReader`. Must never: hand out a record whose checksum,
//! key or position does not check (sled's are checked here; the held ones
//! were encoded by this process's writer), go on past a bad record, or
//! hand out part of a round the writer is still applying to sled.

use std::sync::Arc;

use crate::ledger::Shared;
use crate::ledger::damage;
use crate::ledger::error::{Corruption, LedgerError, Result};
use crate::ledger::record::{self, Record, StreamKey};

/// An iterator over one stream's records, in position order. It stops at
/// the first bad record, which it reports as [`LedgerError::Corrupt`].
pub struct StreamReader {
    source: Source,
}

// One reader per fold or tail, never stored in bulk: its size is moot.
#[allow(clippy::large_enum_variant)]
enum Source {
    /// Records this process appended lately, from memory (checked when
    /// they were encoded).
    Held(std::vec::IntoIter<Record>),
    Sled(SledReader),
}

struct SledReader {
    shared: Arc<Shared>,
    stream: StreamKey,
    next_position: u64,
    iter: sled::Iter,
    /// The writer applies a round to sled one insert at a time and then
    /// publishes its end; records at or past the end published when the
    /// read began belong to a round not wholly applied, and end the read.
    visible_below: u64,
    failed: bool,
}

impl StreamReader {
    pub(crate) fn held(records: Vec<Record>) -> Self {
        Self {
            source: Source::Held(records.into_iter()),
        }
    }

    pub(crate) fn sled(
        shared: Arc<Shared>,
        stream: StreamKey,
        from: u64,
        iter: sled::Iter,
    ) -> Self {
        let visible_below = shared.applied_next_global();
        Self {
            source: Source::Sled(SledReader {
                shared,
                stream,
                next_position: from,
                iter,
                visible_below,
                failed: false,
            }),
        }
    }
}

impl Iterator for StreamReader {
    type Item = Result<Record>;

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.source {
            Source::Held(records) => records.next().map(Ok),
            Source::Sled(reader) => reader.next(),
        }
    }
}

impl SledReader {
    /// Reports a bad record and refuses the stream from now on.
    fn corrupt(&mut self, corruption: Corruption) -> LedgerError {
        self.failed = true;
        tracing::error!(stream = %self.stream, position = self.next_position, %corruption, "corrupt record");
        let mut corrupt = self
            .shared
            .corrupt
            .write()
            .unwrap_or_else(|p| p.into_inner());
        corrupt
            .entry(self.stream.to_string())
            .or_insert((self.next_position, corruption.clone()));
        self.shared.recent.forget(self.stream.as_str());
        LedgerError::Corrupt {
            stream: self.stream.to_string(),
            position: self.next_position,
            corruption,
        }
    }
}

impl SledReader {
    fn next(&mut self) -> Option<Result<Record>> {
        if self.failed {
            return None;
        }
        let (key, value) = match self.iter.next()? {
            Ok(entry) => entry,
            Err(error) if damage::is_damage(&error) => {
                // sled cannot read the rest of the stream: refused whole,
                // named where it stops.
                let detail = error.to_string();
                return Some(Err(self.corrupt(Corruption::Storage { detail })));
            }
            Err(error) => {
                self.failed = true;
                return Some(Err(error.into()));
            }
        };
        let Some((_, position)) = record::parse_record_key(&key) else {
            return Some(Err(self.corrupt(Corruption::BadKey)));
        };
        if position != self.next_position {
            let gap = Corruption::Gap {
                expected: self.next_position,
                found: position,
            };
            return Some(Err(self.corrupt(gap)));
        }
        match Record::decode(value, self.stream.as_str(), position) {
            Ok(record) if record.global_position() >= self.visible_below => None,
            Ok(record) => {
                self.next_position += 1;
                Some(Ok(record))
            }
            Err(corruption) => Some(Err(self.corrupt(corruption))),
        }
    }
}
