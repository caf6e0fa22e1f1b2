//! Reading one stream in position order: from the records this process
//! appended lately when they cover the read, from sled otherwise.
//!
//! Owns: `StreamReader` and the head lookup (`Shared::read_head`), both
//! bounded by the end of the rounds wholly applied. Must never: hand out
//! a record whose checksum, key or position does not check (sled's are
//! checked here; the held ones were encoded by this process's writer), go
//! on past a bad record, or hand out part of a round the writer is still
//! applying to sled.

use std::sync::Arc;

use std::sync::atomic::Ordering;

use crate::ledger::Shared;
use crate::ledger::damage;
use crate::ledger::error::{Corruption, LedgerError, Result};
use crate::ledger::record::{self, Record, StreamKey, stream_prefix};

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

impl Shared {
    /// Where the rounds wholly applied to sled end: readers see records
    /// below it only (see `writer::apply_in_order`).
    pub(crate) fn applied_next_global(&self) -> u64 {
        self.applied_next_global.load(Ordering::Acquire)
    }

    /// The stream's next position: the recent records' head, or read
    /// from the last key of the stream that belongs to a round wholly
    /// applied (at most one round is being applied, so the walk back
    /// is short).
    pub(crate) fn read_head(&self, stream: &StreamKey) -> Result<u64> {
        if let Some(head) = self.recent.head(stream) {
            return Ok(head);
        }
        let visible_below = self.applied_next_global();
        let mut keys = self.log.scan_prefix(stream_prefix(stream)).rev();
        let applying = |value: &sled::IVec| {
            Record::from_envelope(value.clone())
                .is_ok_and(|record| record.global_position() >= visible_below)
        };
        let last = keys.find(|entry| !entry.as_ref().is_ok_and(|(_, value)| applying(value)));
        match last {
            None => Ok(0),
            Some(Err(error)) if damage::is_damage(&error) => {
                let corruption = Corruption::Storage {
                    detail: error.to_string(),
                };
                let mut corrupt = self.corrupt.write().unwrap_or_else(|p| p.into_inner());
                corrupt
                    .entry(stream.to_string())
                    .or_insert((0, corruption.clone()));
                Err(LedgerError::Corrupt {
                    stream: stream.to_string(),
                    position: 0,
                    corruption,
                })
            }
            Some(entry) => {
                let (key, _) = entry?;
                let (_, position) =
                    record::parse_record_key(&key).ok_or_else(|| LedgerError::Corrupt {
                        stream: stream.to_string(),
                        position: 0,
                        corruption: Corruption::BadKey,
                    })?;
                Ok(position + 1)
            }
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

#[cfg(test)]
mod tests {
    use crate::ledger::{Durability, ExpectedPosition, Ledger, NewRecord, OpenMode, StreamKey};
    use std::sync::atomic::Ordering;

    /// What a reader sees while the writer is halfway through a round:
    /// the round's records already in sled but its end not yet published.
    #[test]
    fn readers_of_sled_stop_at_the_end_of_the_rounds_wholly_applied() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let (ledger, _) = Ledger::open(dir.path(), OpenMode::CreateIfMissing).expect("open");
        let stream = StreamKey::new("half/applied").expect("a key");
        let record = |n: u8| NewRecord {
            kind: 1,
            payload: vec![n],
        };
        let appended = ledger
            .append_blocking(
                &stream,
                ExpectedPosition::Exactly(0),
                vec![record(0), record(1), record(2)],
                Durability::Buffered,
            )
            .expect("append");
        // As if only the first record of the round were published.
        let published = appended.first_global_position + 1;
        ledger
            .shared
            .applied_next_global
            .store(published, Ordering::Release);
        ledger.shared.recent.forget(stream.as_str());
        let seen: Vec<u64> = ledger
            .read(&stream, 0)
            .expect("read")
            .map(|record| record.expect("a record").position())
            .collect();
        assert_eq!(seen, vec![0]);
        assert_eq!(ledger.head(&stream).expect("head"), 1);
        ledger
            .shared
            .applied_next_global
            .store(published + 2, Ordering::Release);
        assert_eq!(ledger.read(&stream, 0).expect("read").count(), 3);
        assert_eq!(ledger.head(&stream).expect("head"), 3);
    }
}
