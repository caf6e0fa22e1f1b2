//! The records this process appended last, per stream, kept in memory so
//! that a fold, a tail or a head right after an append reads them from
//! here instead of back through sled.
//!
//! Owns: the newest [`RECENT_RECORDS_PER_STREAM`] records of each stream
//! the writer extended, within [`RECENT_BYTES`] for all streams, and each
//! such stream's head. Must never: answer for a position it does not
//! hold, or drop a record the indexer has not applied to sled yet (until
//! then it is the only place readers find it; the writer adds a round's
//! records once they are journaled, before the append is acknowledged).
//! Records the indexer has yet to apply may take it past its bounds, by
//! at most the indexer's backlog (`indexer::MAX_UNINDEXED_BYTES`).

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
    /// in position order, starting where the stream stood. Only records
    /// whose global position is below `indexed_below` (sled holds them)
    /// may be dropped to make room.
    pub fn extend(&self, appended: &[(StreamKey, Vec<Record>)], indexed_below: u64) {
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
                // Not contiguous with what is held (not expected: the
                // writer takes a held stream's head from here): start
                // again from these records.
                freed += tail.bytes;
                tail.records.clear();
                tail.bytes = 0;
                tail.first = first;
            }
            tail.records.extend(records.iter().cloned());
            tail.bytes += added;
            tail.touched = touched;
            while tail.records.len() > RECENT_RECORDS_PER_STREAM
                && tail
                    .records
                    .front()
                    .is_some_and(|old| old.global_position() < indexed_below)
            {
                if let Some(old) = tail.records.pop_front() {
                    tail.first += 1;
                    tail.bytes -= old.encoded_len();
                    freed += old.encoded_len();
                }
            }
            inner.bytes = inner.bytes + added - freed;
            inner.order.push_back((stream.clone(), touched));
        }
        inner.evict(indexed_below);
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
    /// Drops the streams extended longest ago while over [`RECENT_BYTES`],
    /// stopping at the first one holding a record sled lacks (every stream
    /// extended after it holds a later one).
    fn evict(&mut self, indexed_below: u64) {
        while self.bytes > RECENT_BYTES {
            let Some((stream, touched)) = self.order.front().cloned() else {
                break;
            };
            let Some(tail) = self.streams.get(&stream).filter(|t| t.touched == touched) else {
                self.order.pop_front();
                continue;
            };
            if tail
                .records
                .back()
                .is_some_and(|last| last.global_position() >= indexed_below)
            {
                break;
            }
            self.order.pop_front();
            if let Some(tail) = self.streams.remove(&stream) {
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
        recent.extend(&[(s.clone(), vec![record(&s, 3), record(&s, 4)])], u64::MAX);
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
        recent.extend(&[(s.clone(), many)], u64::MAX);
        assert_eq!(positions(recent.read(&s, 5)), None);
        assert_eq!(
            positions(recent.read(&s, 8)).map(|p| p.len()),
            Some(RECENT_RECORDS_PER_STREAM)
        );
        recent.forget("r/s");
        assert_eq!(recent.head(&s), None);
    }

    /// The indexer's backlog: records sled lacks stay, past both bounds,
    /// and go once sled holds them.
    #[test]
    fn records_sled_lacks_are_kept_past_the_bounds() {
        let recent = Recent::default();
        let s = StreamKey::new("r/unindexed").unwrap();
        let over = RECENT_RECORDS_PER_STREAM as u64 * 2;
        let many: Vec<Record> = (0..over).map(|p| record(&s, p)).collect();
        // Nothing below global 0 is in sled: every record stays.
        recent.extend(&[(s.clone(), many)], 0);
        let held = |from| match recent.read(&s, from) {
            Lookup::Held(records) => Some(records.len() as u64),
            Lookup::Missing => None,
        };
        assert_eq!(held(0), Some(over));
        // sled holds the first half now: the next round drops what it may.
        let next = record(&s, over);
        recent.extend(&[(s.clone(), vec![next])], over / 2);
        assert_eq!(held(0), None);
        assert_eq!(held(over / 2), Some(over / 2 + 1));

        // Past the byte bound, a stream sled lacks records of stays.
        let big = StreamKey::new("r/big").unwrap();
        let payload = vec![0u8; 1024 * 1024];
        let header = |position| Header {
            format_version: FORMAT_VERSION,
            kind: 1,
            position,
            global_position: 1_000 + position,
            timestamp_ms: 0,
        };
        let chunk: Vec<Record> = (0..(RECENT_BYTES / payload.len()) as u64 + 2)
            .map(|p| Record::encoded(encode(&header(p), &big, &payload).into(), header(p)))
            .collect();
        recent.extend(&[(big.clone(), chunk.clone())], 1_000);
        assert_eq!(recent.head(&big), Some(chunk.len() as u64));
        assert_eq!(
            recent.head(&s),
            None,
            "the older stream sled holds went first"
        );
    }
}
