//! The records this process appended last, per stream, kept in memory so
//! that a fold, a tail or a head right after an append reads them from
//! here instead of back through sled.
//!
//! Owns: the newest [`RECENT_RECORDS_PER_STREAM`] records of each stream
//! the writer extended, within [`RECENT_BYTES`] for all streams, and each
//! such stream's head. Must never: answer for a position it does not
//! hold, or hold a record sled does not hold (the writer adds records
//! after their batch is applied, before the append is acknowledged).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use crate::ledger::record::{Record, StreamKey};

/// Most records kept per stream: what a segment's folds and tails need
/// between two of its appends, many times over.
pub const RECENT_RECORDS_PER_STREAM: usize = 64;

/// Most bytes of records kept for all streams, in bytes; past it the
/// streams appended to longest ago are dropped (their reads go to sled).
pub const RECENT_BYTES: usize = 16 * 1024 * 1024;

struct Tail {
    /// Position of `records[0]`.
    first: u64,
    records: VecDeque<Record>,
    bytes: usize,
    /// When this stream was last extended (for eviction).
    touched: u64,
}

impl Tail {
    fn next(&self) -> u64 {
        self.first + self.records.len() as u64
    }
}

#[derive(Default)]
struct Inner {
    streams: HashMap<StreamKey, Tail>,
    /// (stream, touched) in the order streams were extended; an entry
    /// whose `touched` is no longer the stream's is stale.
    order: VecDeque<(StreamKey, u64)>,
    bytes: usize,
    clock: u64,
}

/// The recent records of every stream.
#[derive(Default)]
pub struct Recent {
    inner: Mutex<Inner>,
}

/// What [`Recent::read`] found.
pub enum Lookup {
    /// The records from the position asked for to the stream's end.
    Held(Vec<Record>),
    /// Not held: read sled.
    Missing,
}

impl Recent {
    /// Adds the records one round appended: for each stream, its records
    /// in position order, starting where the stream stood.
    pub fn extend(&self, appended: impl Iterator<Item = (StreamKey, Vec<Record>)>) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        for (stream, records) in appended {
            let Some(first) = records.first().map(Record::position) else {
                continue;
            };
            inner.clock += 1;
            let touched = inner.clock;
            let added: usize = records.iter().map(Record::encoded_len).sum();
            let mut freed = 0;
            let tail = inner.streams.entry(stream.clone()).or_insert_with(|| Tail {
                first,
                records: VecDeque::new(),
                bytes: 0,
                touched,
            });
            if tail.next() != first {
                // Not contiguous with what is held (the cache was dropped
                // in between): start again from these records.
                freed += tail.bytes;
                tail.records.clear();
                tail.bytes = 0;
                tail.first = first;
            }
            tail.records.extend(records);
            tail.bytes += added;
            tail.touched = touched;
            while tail.records.len() > RECENT_RECORDS_PER_STREAM {
                if let Some(old) = tail.records.pop_front() {
                    tail.first += 1;
                    tail.bytes -= old.encoded_len();
                    freed += old.encoded_len();
                }
            }
            inner.bytes = inner.bytes + added - freed;
            inner.order.push_back((stream, touched));
        }
        inner.evict();
    }

    /// The records of `stream` from `from` to its end, if held.
    pub fn read(&self, stream: &StreamKey, from: u64) -> Lookup {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match inner.streams.get(stream) {
            Some(tail) if tail.first <= from && from <= tail.next() => {
                let skip = (from - tail.first) as usize;
                Lookup::Held(tail.records.iter().skip(skip).cloned().collect())
            }
            _ => Lookup::Missing,
        }
    }

    /// The stream's next position, if this process appended to it lately.
    pub fn head(&self, stream: &StreamKey) -> Option<u64> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.streams.get(stream).map(Tail::next)
    }

    /// Forgets a stream (it was found corrupt).
    pub fn forget(&self, stream: &str) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let key = inner.streams.keys().find(|k| k.as_str() == stream).cloned();
        if let Some(tail) = key.and_then(|key| inner.streams.remove(&key)) {
            inner.bytes -= tail.bytes;
        }
    }
}

impl Inner {
    fn evict(&mut self) {
        while self.bytes > RECENT_BYTES {
            let Some((stream, touched)) = self.order.pop_front() else {
                break;
            };
            if self
                .streams
                .get(&stream)
                .is_some_and(|t| t.touched == touched)
                && let Some(tail) = self.streams.remove(&stream)
            {
                self.bytes -= tail.bytes;
            }
        }
        // Stale order entries are dropped once they outnumber the streams.
        if self.order.len() > 4 * self.streams.len() + 1024 {
            let streams = &self.streams;
            self.order.retain(|(stream, touched)| {
                streams.get(stream).is_some_and(|t| t.touched == *touched)
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::record::{FORMAT_VERSION, Header, encode};

    fn record(stream: &StreamKey, position: u64) -> Record {
        let header = Header {
            format_version: FORMAT_VERSION,
            kind: 1,
            position,
            global_position: position,
            timestamp_ms: 0,
        };
        Record::encoded(encode(&header, stream, b"x").into(), header)
    }

    #[test]
    fn reads_what_it_holds_and_nothing_else() {
        let recent = Recent::default();
        let s = StreamKey::new("r/s").unwrap();
        assert!(matches!(recent.read(&s, 0), Lookup::Missing));
        recent.extend([(s.clone(), vec![record(&s, 3), record(&s, 4)])].into_iter());
        assert_eq!(recent.head(&s), Some(5));
        let positions = |l: Lookup| match l {
            Lookup::Held(records) => Some(records.iter().map(Record::position).collect::<Vec<_>>()),
            Lookup::Missing => None,
        };
        assert_eq!(positions(recent.read(&s, 4)), Some(vec![4]));
        assert_eq!(positions(recent.read(&s, 5)), Some(vec![]));
        assert_eq!(positions(recent.read(&s, 2)), None);
        assert_eq!(positions(recent.read(&s, 6)), None);
        let many: Vec<Record> = (5..5 + RECENT_RECORDS_PER_STREAM as u64 + 3)
            .map(|p| record(&s, p))
            .collect();
        recent.extend([(s.clone(), many)].into_iter());
        assert_eq!(positions(recent.read(&s, 5)), None);
        assert_eq!(
            positions(recent.read(&s, 8)).map(|p| p.len()),
            Some(RECENT_RECORDS_PER_STREAM)
        );
        recent.forget("r/s");
        assert_eq!(recent.head(&s), None);
    }
}
