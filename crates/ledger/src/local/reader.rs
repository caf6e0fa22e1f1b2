//! Reading one stream in position order: from the recent records when they
//! cover the read, else from sled and on into the recent records.
//!
//! Owns: `StreamReader` and `Shared::read_head`, both reading sled only below
//! the end of the rounds wholly applied. Must never: hand out a record whose
//! checksum, key or position does not check, go on past a bad record, hand out
//! part of a round being applied, or end before a record appended before the
//! read began.

use std::sync::Arc;

use std::sync::atomic::Ordering;

use crate::error::Corruption;
use crate::local::entry;
use crate::local::error::{LocalError, Result, is_damage};
use crate::local::keys::{self, stream_prefix};
use crate::local::{Shared, corrupt_error};
use crate::record::{Record, StreamKey};

/// One stream's records in position order, up to the first bad one.
pub struct StreamReader {
    source: Source,
}

// One reader per fold or tail, never stored in bulk: its size is moot.
#[allow(clippy::large_enum_variant)]
enum Source {
    /// The recent records (checked when they were encoded).
    Held(std::vec::IntoIter<Record>),
    Sled(SledReader),
}

struct SledReader {
    shared: Arc<Shared>,
    stream: StreamKey,
    next_position: u64,
    iter: sled::Iter,
    /// The entry being read: its envelopes and the position of the next.
    entry: Option<(entry::Envelopes, u64)>,
    /// No entry of the pass read yet (the first may start before the read).
    first_of_pass: bool,
    /// The end published as the pass began: records past it end the pass.
    visible_below: u64,
    /// The pass handed out a record (or is the first pass).
    progressed: bool,
    /// The rest of the stream, from the recent records.
    held: Option<std::vec::IntoIter<Record>>,
    failed: bool,
}

impl StreamReader {
    pub(crate) fn held(records: Vec<Record>) -> Self {
        Self {
            source: Source::Held(records.into_iter()),
        }
    }

    pub(crate) fn sled(shared: Arc<Shared>, stream: StreamKey, from: u64) -> Self {
        // Read before the pass starts: every record below it is in sled.
        let visible_below = shared.applied_next_global();
        let iter = stream_range(&shared.log, &stream, from);
        Self {
            source: Source::Sled(SledReader {
                shared,
                stream,
                next_position: from,
                iter,
                entry: None,
                first_of_pass: true,
                visible_below,
                progressed: true,
                held: None,
                failed: false,
            }),
        }
    }
}

/// sled's entries of `stream` from the one holding position `from` on.
fn stream_range(log: &sled::Tree, stream: &StreamKey, from: u64) -> sled::Iter {
    let prefix = stream_prefix(stream);
    let at = keys::record_key(stream, from);
    // The entry holding `from` has the greatest key up to `from`'s (if sled
    // cannot read it, the read starts at `from` and finds a gap).
    let holding = match from {
        0 => None,
        _ => log.range(prefix.clone()..=at.clone()).next_back(),
    };
    let start = match holding {
        Some(Ok((key, _))) => key.to_vec(),
        _ => at,
    };
    let mut end = prefix;
    end.extend_from_slice(&u64::MAX.to_be_bytes());
    log.range(start..=end)
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
    fn corrupt(&mut self, corruption: Corruption) -> LocalError {
        self.failed = true;
        tracing::error!(stream = %self.stream, position = self.next_position, %corruption, "corrupt record");
        if crate::local::index::blames_the_index(&corruption) {
            let found = format!(
                "stream {} position {}: {corruption}",
                self.stream, self.next_position
            );
            crate::local::index::mark_damaged(&self.shared.path, &found);
        }
        self.shared.recent.forget(self.stream.as_str());
        self.shared
            .refuse(&self.stream, self.next_position, corruption)
    }
}

impl Shared {
    /// Where the rounds wholly applied to sled end (`indexer::publish`).
    pub(crate) fn applied_next_global(&self) -> u64 {
        self.applied_next_global.load(Ordering::Acquire)
    }

    /// The stream's next position (recent records, else sled's applied end).
    pub(crate) fn read_head(&self, stream: &StreamKey) -> Result<u64> {
        if let Some(head) = self.recent.head(stream) {
            return Ok(head);
        }
        let visible_below = self.applied_next_global();
        let mut keys = self.log.scan_prefix(stream_prefix(stream)).rev();
        // An entry's records are of one round: its first tells.
        let applying = |value: &sled::IVec| {
            entry::first_global(value).is_ok_and(|global| global >= visible_below)
        };
        let last = keys.find(|entry| !entry.as_ref().is_ok_and(|(_, value)| applying(value)));
        match last {
            None => Ok(0),
            Some(Err(error)) if is_damage(&error) => {
                let detail = error.to_string();
                Err(self.refuse(stream, 0, Corruption::Storage { detail }))
            }
            Some(found) => {
                let (key, value) = found?;
                let (_, position) = keys::parse_record_key(&key)
                    .ok_or_else(|| corrupt_error(stream, 0, Corruption::BadKey))?;
                Ok(position + entry::span(&value))
            }
        }
    }
}

impl SledReader {
    /// Passes over sled, each to the end applied when it began, then the
    /// recent records, which drop no record sled lacks: after a pass the next
    /// record is held or below the next pass's end. An empty pass ends it.
    fn next(&mut self) -> Option<Result<Record>> {
        loop {
            if let Some(held) = &mut self.held {
                return held.next().map(Ok);
            }
            if self.failed {
                return None;
            }
            if let Some(item) = self.next_in_pass() {
                self.progressed = true;
                return Some(item);
            }
            if !self.progressed {
                return None;
            }
            if let Some(records) =
                self.shared
                    .recent
                    .read(&self.stream, self.next_position, usize::MAX)
            {
                invariant!(
                    records
                        .first()
                        .is_none_or(|r| r.position() == self.next_position),
                    "the recent records of {} read from {} start at {:?}",
                    self.stream,
                    self.next_position,
                    records.first().map(Record::position)
                );
                self.held = Some(records.into_iter());
                continue;
            }
            self.visible_below = self.shared.applied_next_global();
            self.iter = stream_range(&self.shared.log, &self.stream, self.next_position);
            self.entry = None;
            self.first_of_pass = true;
            self.progressed = false;
        }
    }

    /// The pass's next record, or `None` at its end.
    fn next_in_pass(&mut self) -> Option<Result<Record>> {
        loop {
            if let Some((envelopes, position)) = &mut self.entry {
                let Some(envelope) = envelopes.next() else {
                    self.entry = None;
                    continue;
                };
                let at = *position;
                *position += 1;
                // Records before the read's start, in the entry holding it.
                if at < self.next_position {
                    continue;
                }
                debug_assert_eq!(at, self.next_position);
                let record = envelope.and_then(|e| Record::decode(e, self.stream.as_str(), at));
                return match record {
                    Ok(record) if record.global_position() >= self.visible_below => {
                        // A round not wholly applied: the pass ends here.
                        self.entry = None;
                        None
                    }
                    Ok(record) => {
                        self.next_position += 1;
                        Some(Ok(record))
                    }
                    Err(corruption) => Some(Err(self.corrupt(corruption))),
                };
            }
            match self.next_entry()? {
                Ok(entry) => self.entry = Some(entry),
                Err(error) => return Some(Err(error)),
            }
        }
    }

    /// The pass's next entry and its first position, or `None` at its end.
    fn next_entry(&mut self) -> Option<Result<(entry::Envelopes, u64)>> {
        let (key, value) = match self.iter.next()? {
            Ok(entry) => entry,
            Err(error) if is_damage(&error) => {
                // sled cannot read on: the stream is refused from here.
                let detail = error.to_string();
                return Some(Err(self.corrupt(Corruption::Storage { detail })));
            }
            Err(error) => {
                self.failed = true;
                return Some(Err(error.into()));
            }
        };
        let Some((_, position)) = keys::parse_record_key(&key) else {
            return Some(Err(self.corrupt(Corruption::BadKey)));
        };
        let holds_the_start =
            std::mem::take(&mut self.first_of_pass) && position < self.next_position;
        if position != self.next_position && !holds_the_start {
            let gap = Corruption::Gap {
                expected: self.next_position,
                found: position,
            };
            return Some(Err(self.corrupt(gap)));
        }
        Some(Ok((
            entry::envelopes(value, &self.shared.journal_files),
            position,
        )))
    }
}

#[cfg(test)]
mod tests {
    use crate::local::{LocalStore, OpenMode};
    use crate::{Durability, ExpectedPosition, NewRecord, StreamKey};
    use std::sync::atomic::Ordering;

    /// What a reader sees while the indexer is halfway through its
    /// rounds: the second round's entry already in sled but its end not yet
    /// published (an end is published at a batch's end only).
    #[test]
    fn readers_of_sled_stop_at_the_end_of_the_rounds_wholly_applied() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let (ledger, _) = LocalStore::open(dir.path(), OpenMode::CreateIfMissing).expect("open");
        let stream = StreamKey::new("half/applied").expect("a key");
        let records = |from: u8, n: u8| {
            (from..from + n)
                .map(|i| NewRecord {
                    kind: 1,
                    payload: vec![i],
                })
                .collect::<Vec<_>>()
        };
        let append = |expected, from, n| {
            ledger
                .append_blocking(
                    &stream,
                    ExpectedPosition::Exactly(expected),
                    records(from, n),
                    Durability::Buffered,
                )
                .expect("append")
        };
        append(0, 0, 3);
        // Applied apart, so the rounds are two entries (the indexer joins
        // the rounds of one batch, and publishes at a batch's end).
        ledger.shared.index_queue.wait_until_applied();
        let second = append(3, 3, 2);
        // As if only the first round were published.
        ledger.shared.index_queue.wait_until_applied();
        let published = second.first_global_position;
        ledger
            .shared
            .applied_next_global
            .store(published, Ordering::Release);
        ledger.shared.recent.forget(stream.as_str());
        let seen: Vec<u64> = ledger
            .read_blocking(&stream, 0)
            .expect("read")
            .map(|record| record.expect("a record").position())
            .collect();
        assert_eq!(seen, vec![0, 1, 2]);
        assert_eq!(ledger.head_blocking(&stream).expect("head"), 3);
        let from_inside: Vec<u64> = ledger
            .read_blocking(&stream, 1)
            .expect("read")
            .map(|record| record.expect("a record").position())
            .collect();
        assert_eq!(from_inside, vec![1, 2], "a read from inside an entry");
        ledger
            .shared
            .applied_next_global
            .store(published + 2, Ordering::Release);
        assert_eq!(ledger.read_blocking(&stream, 0).expect("read").count(), 5);
        assert_eq!(ledger.read_blocking(&stream, 4).expect("read").count(), 1);
        assert_eq!(ledger.head_blocking(&stream).expect("head"), 5);
    }

    /// Records the indexer has not applied yet are read from memory, also
    /// by a read that starts in sled.
    #[test]
    fn a_read_from_sled_goes_on_into_the_records_not_yet_indexed() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let (ledger, _) = LocalStore::open(dir.path(), OpenMode::CreateIfMissing).expect("open");
        let stream = StreamKey::new("not/indexed").expect("a key");
        let records = |n: usize| {
            (0..n)
                .map(|i| NewRecord {
                    kind: 1,
                    payload: vec![i as u8],
                })
                .collect::<Vec<_>>()
        };
        let append = |expected, n| {
            ledger
                .append_blocking(
                    &stream,
                    ExpectedPosition::Exactly(expected),
                    records(n),
                    Durability::Buffered,
                )
                .expect("append")
        };
        append(0, 100);
        ledger.shared.index_queue.wait_until_applied();
        // Only sled holds the first hundred now.
        ledger.shared.recent.forget(stream.as_str());
        ledger.shared.index_queue.pause(true);
        append(100, 3);
        let positions: Vec<u64> = ledger
            .read_blocking(&stream, 0)
            .expect("read")
            .map(|record| record.expect("a record").position())
            .collect();
        assert_eq!(positions, (0..103).collect::<Vec<_>>());
        assert_eq!(ledger.head_blocking(&stream).expect("head"), 103);
        let applied = ledger.shared.applied_next_global();
        assert_eq!(applied, 100, "the indexer was held back");
        ledger.shared.index_queue.pause(false);
        ledger.shared.index_queue.wait_until_applied();
        assert_eq!(ledger.shared.applied_next_global(), 103);
        ledger.shared.recent.forget(stream.as_str());
        assert_eq!(ledger.read_blocking(&stream, 0).expect("read").count(), 103);
        assert_eq!(ledger.head_blocking(&stream).expect("head"), 103);
    }
}
