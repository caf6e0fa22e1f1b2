//! Values of the index's log tree: one value for records of one stream at
//! consecutive positions, under the first one's key. Since format 4 it points
//! into the journal (extents, the first global position, the count); older
//! stores hold the envelopes in the value, and still read. Pointers because
//! sled writes each value about four times over while the journal already
//! holds the records: a pointer is tens of bytes a run.
//!
//! Owns: the value layouts and telling them apart (a pointer starts with
//! [`POINTER_TAG`], an envelope with its format version, 1), cutting runs into
//! entries ([`cut`]), reading a value back into envelopes. Must never: join
//! two streams' records, point at more than [`MAX_POINTED_BYTES`] or
//! [`MAX_EXTENTS_PER_ENTRY`] (a larger record is an entry alone), or cut an
//! envelope at another length than its header states.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::error::Corruption;
use crate::local::journal::{self, JournalFiles};
use crate::local::keys;
use crate::record::{self, Record, StreamKey};

/// The first byte of a pointer value (an envelope's is its format version, 1).
pub const POINTER_TAG: u8 = 0xB7;

/// Most bytes (prefixes included) one entry points at: what a read may read.
pub const MAX_POINTED_BYTES: usize = 64 * 1024;

/// Most extents one entry holds (bounds a pointer's size and its `pread`s).
pub const MAX_EXTENTS_PER_ENTRY: usize = 32;

/// Bytes before each record in a journal entry: its length (u32).
pub const RECORD_PREFIX_BYTES: u64 = 4;

/// `bytes` bytes at `offset` of the journal file based at `file`: `records`
/// consecutive records of one stream, each after its length prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub file: u64,
    pub offset: u64,
    pub bytes: u64,
    pub records: u64,
}

impl Extent {
    /// Where the bytes after this extent start.
    fn end(&self) -> u64 {
        self.offset.saturating_add(self.bytes)
    }

    /// The extents of `runs`, in order, in the entry at `entry_offset`.
    pub fn of_runs(file: u64, entry_offset: u64, runs: &[(StreamKey, Vec<Record>)]) -> Vec<Self> {
        let mut offset = journal::records_offset(entry_offset);
        let prefixed = |record: &Record| RECORD_PREFIX_BYTES + record.encoded_len() as u64;
        runs.iter()
            .map(|(_, records)| {
                let bytes = records.iter().map(prefixed).sum();
                let records = records.len() as u64;
                offset += bytes;
                Extent {
                    file,
                    offset: offset - bytes,
                    bytes,
                    records,
                }
            })
            .collect()
    }
}

/// One stream's records at consecutive positions, and the extents holding them.
pub(crate) struct Run {
    pub stream: StreamKey,
    pub records: Vec<Record>,
    pub extents: Vec<Extent>,
}

/// One entry to store, and the other keys it covers (a replay removes them).
pub(crate) struct Cut<'a> {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    stream: &'a StreamKey,
    first: u64,
    count: u64,
}

impl Cut<'_> {
    pub fn covered_keys(&self) -> impl Iterator<Item = Vec<u8>> + '_ {
        (self.first + 1..self.first + self.count).map(|p| keys::record_key(self.stream, p))
    }
}

/// The entries of `runs`, cut at the bounds (touching extents joined).
pub(crate) fn cut(runs: &[Run]) -> Vec<Cut<'_>> {
    let mut cuts = Vec::new();
    for run in runs {
        let mut records = run.records.iter();
        let mut building = Pointer::default();
        let mut first: Option<&Record> = None;
        for extent in &run.extents {
            let mut offset = extent.offset;
            for record in (&mut records).take(extent.records as usize) {
                let len = RECORD_PREFIX_BYTES + record.encoded_len() as u64;
                let joins = building.joins(extent.file, offset);
                if let Some(head) = first
                    && (building.bytes() + len > MAX_POINTED_BYTES as u64
                        || (!joins && building.extents.len() >= MAX_EXTENTS_PER_ENTRY))
                {
                    cuts.push(building.finish(&run.stream, head));
                    building = Pointer::default();
                    first = None;
                }
                let head = *first.get_or_insert(record);
                if building.count == 0 {
                    building.first_global = head.global_position();
                }
                building.push(extent.file, offset, len);
                offset += len;
            }
        }
        if let Some(head) = first {
            cuts.push(building.finish(&run.stream, head));
        }
        debug_assert!(records.next().is_none(), "records past the extents");
    }
    cuts
}

/// A pointer value, decoded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pointer {
    pub first_global: u64,
    pub count: u64,
    pub extents: Vec<Extent>,
}

/// A pointer as stored (between [`POINTER_TAG`] and its CRC-32C): postcard
/// varints; each extent's file as the difference from the one before, its
/// offset from where the one before ended in the same file.
#[derive(Serialize, Deserialize)]
struct StoredPointer {
    first_global: u64,
    count: u64,
    extents: Vec<(u64, u64, u64, u64)>,
}

impl Pointer {
    fn bytes(&self) -> u64 {
        self.extents.iter().map(|e| e.bytes).sum()
    }

    /// Whether a record at `offset` of `file` extends the last extent.
    fn joins(&self, file: u64, offset: u64) -> bool {
        self.extents
            .last()
            .is_some_and(|last| last.file == file && last.end() == offset)
    }

    fn push(&mut self, file: u64, offset: u64, len: u64) {
        self.count += 1;
        if self.joins(file, offset)
            && let Some(last) = self.extents.last_mut()
        {
            last.bytes += len;
            last.records += 1;
            return;
        }
        self.extents.push(Extent {
            file,
            offset,
            bytes: len,
            records: 1,
        });
    }

    fn finish<'a>(self, stream: &'a StreamKey, first: &Record) -> Cut<'a> {
        Cut {
            key: keys::record_key(stream, first.position()),
            value: self.encode(),
            stream,
            first: first.position(),
            count: self.count,
        }
    }

    /// The stored value: the tag, the pointer, its CRC-32C.
    pub fn encode(&self) -> Vec<u8> {
        let mut previous: Option<&Extent> = None;
        let extents = self
            .extents
            .iter()
            .map(|extent| {
                let (file, offset) = match previous {
                    Some(before) if before.file == extent.file => {
                        (0, extent.offset.wrapping_sub(before.end()))
                    }
                    Some(before) => (extent.file.wrapping_sub(before.file), extent.offset),
                    None => (extent.file, extent.offset),
                };
                previous = Some(extent);
                (file, offset, extent.bytes, extent.records)
            })
            .collect();
        let stored = StoredPointer {
            first_global: self.first_global,
            count: self.count,
            extents,
        };
        let mut value = vec![POINTER_TAG];
        // Serialising plain numbers into a Vec cannot fail.
        value.extend(postcard::to_allocvec(&stored).unwrap_or_default());
        let crc = crc32c::crc32c(&value);
        value.extend_from_slice(&crc.to_le_bytes());
        value
    }

    /// A stored pointer, checked; `None` for an envelope (before format 4).
    pub fn decode(value: &[u8]) -> Option<Result<Self, Corruption>> {
        if value.first() != Some(&POINTER_TAG) {
            return None;
        }
        let bad = |why: &str| Corruption::Pointer {
            detail: why.to_owned(),
        };
        Some((|| {
            let Some(body_end) = value.len().checked_sub(4).filter(|&end| end >= 1) else {
                return Err(bad("too short"));
            };
            let mut crc = [0u8; 4];
            crc.copy_from_slice(&value[body_end..]);
            if crc32c::crc32c(&value[..body_end]) != u32::from_le_bytes(crc) {
                return Err(bad("its checksum does not match"));
            }
            let stored: StoredPointer = postcard::from_bytes(&value[1..body_end])
                .map_err(|error| bad(&format!("it does not decode: {error}")))?;
            let mut extents: Vec<Extent> = Vec::with_capacity(stored.extents.len());
            for (file, offset, bytes, records) in stored.extents {
                let (file, offset) = match extents.last() {
                    Some(before) if file == 0 => (before.file, before.end().wrapping_add(offset)),
                    Some(before) => (before.file.wrapping_add(file), offset),
                    None => (file, offset),
                };
                extents.push(Extent {
                    file,
                    offset,
                    bytes,
                    records,
                });
            }
            let pointer = Pointer {
                first_global: stored.first_global,
                count: stored.count,
                extents,
            };
            let counted: u64 = pointer.extents.iter().map(|e| e.records).sum();
            if counted != pointer.count || pointer.count == 0 {
                return Err(bad("its extents do not hold its record count"));
            }
            if pointer.bytes() > MAX_POINTED_BYTES.max(MAX_LONE_RECORD_BYTES) as u64 {
                return Err(bad("it points at more bytes than an entry may"));
            }
            Ok(pointer)
        })())
    }

    /// The bytes the extents hold, end to end (each record after its length).
    fn read(&self, files: &JournalFiles) -> Result<Vec<u8>, Corruption> {
        let mut raw = Vec::with_capacity(self.bytes() as usize);
        let mut span = Vec::new();
        for group in self.spans() {
            let (first, last) = (group[0], group[group.len() - 1]);
            let failed = |error: std::io::Error| Corruption::Journal {
                detail: format!(
                    "journal file {} bytes {}..{}: {error}",
                    first.file,
                    first.offset,
                    last.end()
                ),
            };
            if let [only] = group {
                files
                    .read_into(only.file, only.offset, only.bytes as usize, &mut raw)
                    .map_err(failed)?;
                continue;
            }
            // Close extents of one file: one read, the bytes between dropped.
            span.clear();
            let len = (last.end() - first.offset) as usize;
            files
                .read_into(first.file, first.offset, len, &mut span)
                .map_err(failed)?;
            for extent in group {
                let at = (extent.offset - first.offset) as usize;
                raw.extend_from_slice(&span[at..at + extent.bytes as usize]);
            }
        }
        Ok(raw)
    }

    /// The extents in groups one read covers (one file, in order, bounded).
    fn spans(&self) -> impl Iterator<Item = &[Extent]> {
        let mut rest = self.extents.as_slice();
        std::iter::from_fn(move || {
            let first = rest.first()?;
            let len = rest
                .windows(2)
                .take_while(|pair| {
                    let (before, next) = (pair[0], pair[1]);
                    next.file == first.file
                        && next.offset >= before.end()
                        && next.end() - first.offset <= MAX_SPAN_READ_BYTES
                })
                .count()
                + 1;
            let (group, after) = rest.split_at(len);
            rest = after;
            Some(group)
        })
    }
}

/// Most bytes one read of a pointer's extents covers, gaps included.
const MAX_SPAN_READ_BYTES: u64 = 128 * 1024;

/// Most bytes a pointer at a record alone covers: the largest, prefixed.
const MAX_LONE_RECORD_BYTES: usize = RECORD_PREFIX_BYTES as usize
    + record::HEADER_BYTES
    + record::MAX_STREAM_KEY_BYTES
    + record::MAX_PAYLOAD_BYTES
    + record::CRC_BYTES;

/// Positions a stored value covers (a bad pointer one, a torn envelope too).
pub fn span(value: &sled::IVec) -> u64 {
    match Pointer::decode(value) {
        Some(Ok(pointer)) => pointer.count,
        Some(Err(_)) => 1,
        None => inline_envelopes(Bytes::from_owner(value.clone())).count() as u64,
    }
}

/// The global position of a stored value's first record.
pub fn first_global(value: &sled::IVec) -> Result<u64, Corruption> {
    match Pointer::decode(value) {
        Some(pointer) => Ok(pointer?.first_global),
        None => match inline_envelopes(Bytes::from_owner(value.clone())).next() {
            Some(envelope) => Ok(Record::from_envelope(envelope?)?.global_position()),
            None => Err(Corruption::Truncated { len: 0 }),
        },
    }
}

/// The envelopes of a stored value: read from the journal, or cut from it.
pub fn envelopes(value: sled::IVec, files: &JournalFiles) -> Envelopes {
    match Pointer::decode(&value) {
        None => inline_envelopes(Bytes::from_owner(value)),
        Some(pointer) => match pointer.and_then(|p| Ok((p.read(files)?, p.count))) {
            Ok((raw, count)) => Envelopes {
                prefixed: Some(count),
                ..inline_envelopes(Bytes::from(raw))
            },
            Err(corruption) => Envelopes {
                failed: Some(corruption),
                ..inline_envelopes(Bytes::new())
            },
        },
    }
}

/// The envelopes of a value of records; a torn one yields `Truncated`.
fn inline_envelopes(value: Bytes) -> Envelopes {
    Envelopes {
        value,
        offset: 0,
        done: false,
        failed: None,
        prefixed: None,
    }
}

/// The iterator [`envelopes`] returns.
pub struct Envelopes {
    value: Bytes,
    offset: usize,
    done: bool,
    /// A pointer that could not be read: the one item.
    failed: Option<Corruption>,
    /// Through a pointer: this many length-prefixed envelopes still due.
    prefixed: Option<u64>,
}

impl Envelopes {
    /// The next of `due` envelopes; its prefix must be its header's length.
    fn next_prefixed(&mut self, due: u64) -> Option<Result<Bytes, Corruption>> {
        let rest = self.value.len() - self.offset;
        if due == 0 {
            self.done = true;
            return (rest > 0).then_some(Err(Corruption::Truncated { len: rest }));
        }
        let at = self.offset + RECORD_PREFIX_BYTES as usize;
        let word = self
            .value
            .get(self.offset..at)
            .map(|word| u32::from_le_bytes([word[0], word[1], word[2], word[3]]) as usize);
        let envelope = word.filter(|&len| {
            self.value
                .get(at..at + len)
                .is_some_and(|bytes| record::envelope_len(bytes) == Some(len))
        });
        match envelope {
            Some(len) => {
                self.offset = at + len;
                self.prefixed = Some(due - 1);
                Some(Ok(self.value.slice(at..at + len)))
            }
            None => {
                self.done = true;
                Some(Err(Corruption::Truncated { len: rest }))
            }
        }
    }
}

impl Iterator for Envelopes {
    type Item = Result<Bytes, Corruption>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(corruption) = self.failed.take() {
            self.done = true;
            return Some(Err(corruption));
        }
        if self.done {
            return None;
        }
        if let Some(due) = self.prefixed {
            return self.next_prefixed(due);
        }
        let rest = self.value.len() - self.offset;
        if rest == 0 && self.offset > 0 {
            return None;
        }
        match record::envelope_len(&self.value[self.offset..]) {
            Some(len) if len <= rest => {
                let envelope = self.value.slice(self.offset..self.offset + len);
                self.offset += len;
                Some(Ok(envelope))
            }
            _ => {
                self.done = true;
                Some(Err(Corruption::Truncated { len: rest }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::journal::JournalWriter;
    use crate::record::{FORMAT_VERSION, Header};

    fn record(stream: &StreamKey, position: u64, payload_len: usize) -> Record {
        let header = Header {
            format_version: FORMAT_VERSION,
            kind: 1,
            position,
            global_position: 100 + position,
            timestamp_ms: 7,
        };
        let bytes = record::encode(&header, stream, &vec![position as u8; payload_len]);
        Record::encoded(Bytes::from(bytes), header)
    }

    /// Writes `records` to a fresh journal as one round per record and
    /// gives back the run the indexer would hold for them.
    fn journaled(dir: &std::path::Path, stream: &StreamKey, records: Vec<Record>) -> Run {
        let base = records[0].global_position();
        let mut writer = JournalWriter::create(dir, base, 1 << 20).expect("a journal");
        let mut extents = Vec::new();
        for record in &records {
            let global = record.global_position();
            let start = writer
                .append(global, global + 1, std::iter::once(&record.bytes()[..]))
                .expect("append");
            let run = [(stream.clone(), vec![record.clone()])];
            extents.extend(Extent::of_runs(base, start, &run));
        }
        Run {
            stream: stream.clone(),
            records,
            extents,
        }
    }

    fn positions(value: &[u8], files: &JournalFiles, stream: &str, first: u64) -> Vec<u64> {
        envelopes(sled::IVec::from(value), files)
            .zip(first..)
            .map(|(envelope, position)| {
                let envelope = envelope.expect("an envelope");
                Record::decode(envelope, stream, position)
                    .expect("a record")
                    .position()
            })
            .collect()
    }

    #[test]
    fn a_pointer_reads_back_its_records_from_the_journal() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let stream = StreamKey::new("e/one").expect("a key");
        let records: Vec<Record> = (3..8).map(|p| record(&stream, p, 40)).collect();
        let run = journaled(dir.path(), &stream, records);
        let cuts = cut(std::slice::from_ref(&run));
        assert_eq!(cuts.len(), 1);
        assert_eq!(cuts[0].key, keys::record_key(&stream, 3));
        assert_eq!(cuts[0].covered_keys().count(), 4);
        let value = sled::IVec::from(cuts[0].value.as_slice());
        assert!(
            value.len() < 80,
            "a pointer is small: {} bytes",
            value.len()
        );
        assert_eq!(span(&value), 5);
        assert_eq!(first_global(&value), Ok(103));
        let files = JournalFiles::new(dir.path());
        assert_eq!(positions(&value, &files, "e/one", 3), vec![3, 4, 5, 6, 7]);
        let pointer = Pointer::decode(&value)
            .expect("a pointer")
            .expect("it checks");
        assert_eq!(pointer.extents.len(), 5, "one round each: apart");
        assert_eq!(Pointer::decode(&pointer.encode()), Some(Ok(pointer)));
    }

    #[test]
    fn a_damaged_pointer_or_journal_is_corruption_not_a_wrong_record() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let stream = StreamKey::new("e/bad").expect("a key");
        let run = journaled(dir.path(), &stream, vec![record(&stream, 0, 30)]);
        let value = cut(std::slice::from_ref(&run)).remove(0).value;
        let files = JournalFiles::new(dir.path());
        let mut flipped = value.clone();
        flipped[2] ^= 1;
        let read: Vec<_> = envelopes(sled::IVec::from(flipped), &files).collect();
        assert!(matches!(read.as_slice(), [Err(Corruption::Pointer { .. })]));
        // The journal file gone: the record cannot be read.
        for (_, path) in journal::files(dir.path()).expect("files") {
            std::fs::remove_file(path).expect("remove");
        }
        let read: Vec<_> =
            envelopes(sled::IVec::from(value), &JournalFiles::new(dir.path())).collect();
        assert!(matches!(read.as_slice(), [Err(Corruption::Journal { .. })]));
    }

    #[test]
    fn entries_stay_under_their_bounds_and_a_large_record_stands_alone() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let stream = StreamKey::new("e/big").expect("a key");
        let mut records: Vec<Record> = (0..3).map(|p| record(&stream, p, 30_000)).collect();
        records.push(record(&stream, 3, 100_000));
        records.push(record(&stream, 4, 10));
        let run = journaled(dir.path(), &stream, records);
        let spans: Vec<u64> = cut(std::slice::from_ref(&run))
            .iter()
            .map(|c| span(&sled::IVec::from(c.value.as_slice())))
            .collect();
        assert_eq!(spans, vec![2, 1, 1, 1]);

        let many: Vec<Record> = (0..40).map(|p| record(&stream, p, 10)).collect();
        let dir = tempfile::tempdir().expect("a scratch directory");
        let run = journaled(dir.path(), &stream, many);
        let cuts = cut(std::slice::from_ref(&run));
        let spans: Vec<u64> = cuts
            .iter()
            .map(|c| span(&sled::IVec::from(c.value.as_slice())))
            .collect();
        assert_eq!(spans, vec![MAX_EXTENTS_PER_ENTRY as u64, 8]);
        let files = JournalFiles::new(dir.path());
        let second = positions(&cuts[1].value, &files, "e/big", 32);
        assert_eq!(second, (32..40).collect::<Vec<_>>());
    }

    #[test]
    fn a_pointer_across_files_round_trips_and_a_wrong_count_is_refused() {
        let pointer = Pointer {
            first_global: 1 << 40,
            count: 5,
            extents: vec![
                Extent {
                    file: 1_000,
                    offset: 30_000_000,
                    bytes: 400,
                    records: 2,
                },
                Extent {
                    file: 2_000_000,
                    offset: 24,
                    bytes: 900,
                    records: 2,
                },
                Extent {
                    file: 2_000_000,
                    offset: 5_000,
                    bytes: 70,
                    records: 1,
                },
            ],
        };
        let value = pointer.encode();
        assert!(value.len() < 40, "{} bytes", value.len());
        assert_eq!(Pointer::decode(&value), Some(Ok(pointer.clone())));
        let mut wrong = pointer;
        wrong.count = 6;
        assert!(matches!(
            Pointer::decode(&wrong.encode()),
            Some(Err(Corruption::Pointer { .. }))
        ));
    }

    #[test]
    fn extents_close_together_in_one_file_are_read_at_once() {
        let extent = |file, offset, bytes| Extent {
            file,
            offset,
            bytes,
            records: 1,
        };
        let pointer = Pointer {
            first_global: 0,
            count: 5,
            extents: vec![
                extent(1, 100, 50),
                extent(1, 400, 50),
                extent(1, 400 + MAX_SPAN_READ_BYTES, 50),
                extent(2, 24, 10),
                extent(2, 10, 10),
            ],
        };
        let groups: Vec<usize> = pointer.spans().map(<[Extent]>::len).collect();
        assert_eq!(groups, vec![2, 1, 1, 1], "too far, another file, backwards");
    }

    /// Stores written before format 4 hold the records in the value.
    #[test]
    fn a_value_of_records_reads_as_it_is_and_a_torn_one_is_truncated() {
        let stream = StreamKey::new("e/torn").expect("a key");
        let records: Vec<Record> = (0..3).map(|p| record(&stream, p, 20)).collect();
        let value: Vec<u8> = records.iter().flat_map(|r| r.bytes().to_vec()).collect();
        let files = JournalFiles::new(std::path::Path::new("/nonexistent"));
        assert_eq!(positions(&value, &files, "e/torn", 0), vec![0, 1, 2]);
        assert_eq!(span(&sled::IVec::from(value.as_slice())), 3);
        assert_eq!(first_global(&sled::IVec::from(value.as_slice())), Ok(100));
        for cut in [value.len() - 1, value.len() - 30, 5] {
            let torn = sled::IVec::from(&value[..cut]);
            let results: Vec<bool> = envelopes(torn, &files).map(|e| e.is_ok()).collect();
            assert_eq!(results.last(), Some(&false), "cut at {cut}");
            assert!(results[..results.len() - 1].iter().all(|ok| *ok));
        }
        let empty = sled::IVec::from(&[][..]);
        assert_eq!(
            envelopes(empty, &files).count(),
            1,
            "an empty value is a torn record"
        );
    }
}
