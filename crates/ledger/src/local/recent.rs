//! The records this process appended last, per stream, in memory: a fold, a
//! tail or a head right after an append reads them here, not through sled.
//!
//! Owns: the newest [`RECENT_RECORDS_PER_STREAM`] records (up to twice that
//! between trims) of each stream extended, within [`RECENT_BYTES`], and its
//! head. Must never: free a record on the writer's path (it hands them back),
//! answer for a position it does not hold, or let go of a record the indexer
//! has not applied (only here do readers find it; past the bounds by at most
//! the indexer's backlog).

use std::collections::VecDeque;
use std::sync::Mutex;

use crate::local::lock;

use crate::record::{Record, StreamKey, StreamMap};

/// Records a trim leaves a stream (what a segment's folds and tails need, many
/// times over); it holds up to twice this, then the older half goes at once.
pub const RECENT_RECORDS_PER_STREAM: usize = 64;

/// Most bytes of records kept; past it the streams extended longest ago go.
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

    /// Moves the older records sled holds to `retired`; their bytes.
    fn trim(&mut self, indexed_below: u64, retired: &mut Vec<Record>) -> usize {
        let excess = self.records.len().saturating_sub(RECENT_RECORDS_PER_STREAM);
        // Found by bisection: a backlogged indexer must not make every append
        // walk a long stream's older half.
        let held_by_sled = self
            .records
            .partition_point(|old| old.global_position() < indexed_below)
            .min(excess);
        let start = retired.len();
        retired.extend(self.records.drain(..held_by_sled));
        let bytes = retired[start..].iter().map(Record::encoded_len).sum();
        self.first += held_by_sled as u64;
        self.bytes -= bytes;
        bytes
    }
}

#[derive(Default)]
struct Inner {
    streams: StreamMap<Tail>,
    /// (stream, touched) in order of extension; stale once `touched` moved.
    order: VecDeque<(StreamKey, u64)>,
    bytes: usize,
    clock: u64,
}

/// The recent records of every stream.
#[derive(Default)]
pub struct Recent {
    inner: Mutex<Inner>,
}

impl Recent {
    /// Adds a round's records. Only records sled holds (below `indexed_below`)
    /// make room, moved to `retired`. In halves, and not dropped here, because
    /// judging and dropping each old record cost two cache misses a record, a
    /// seventh of the writer's time under 64 writers.
    pub fn extend(
        &self,
        appended: &[(StreamKey, Vec<Record>)],
        indexed_below: u64,
        retired: &mut Vec<Record>,
    ) {
        let mut inner = lock(&self.inner);
        for (stream, records) in appended {
            let Some(first) = records.first().map(Record::position) else {
                continue;
            };
            inner.clock += 1;
            let touched = inner.clock;
            let added: usize = records.iter().map(Record::encoded_len).sum();
            let mut freed = 0;
            // Looked up first: cloning a held key touches its count's cache
            // line, shared with the tasks and the indexer.
            if !inner.streams.contains_key(stream) {
                let fresh = Tail {
                    first,
                    records: VecDeque::new(),
                    bytes: 0,
                    touched,
                };
                inner.streams.insert(stream.clone(), fresh);
            }
            let Some(tail) = inner.streams.get_mut(stream) else {
                continue;
            };
            if tail.next() != first {
                // Not contiguous (not expected): start again from these.
                freed += tail.bytes;
                retired.extend(tail.records.drain(..));
                tail.bytes = 0;
                tail.first = first;
            }
            tail.records.extend(records.iter().cloned());
            tail.bytes += added;
            tail.touched = touched;
            if tail.records.len() >= 2 * RECENT_RECORDS_PER_STREAM {
                freed += tail.trim(indexed_below, retired);
            }
            inner.bytes = inner.bytes + added - freed;
            inner.order.push_back((stream.clone(), touched));
        }
        inner.evict(indexed_below, retired);
    }

    /// Up to `max_records` of `stream` from `from`, if held (`None`: sled).
    pub fn read(&self, stream: &StreamKey, from: u64, max_records: usize) -> Option<Vec<Record>> {
        let inner = lock(&self.inner);
        let tail = inner.streams.get(stream)?;
        let skip = from
            .checked_sub(tail.first)
            .filter(|_| from <= tail.next())?;
        let records = tail.records.iter().skip(skip as usize).take(max_records);
        Some(records.cloned().collect())
    }

    /// The stream's next position, if this process appended to it lately.
    pub fn head(&self, stream: &StreamKey) -> Option<u64> {
        let inner = lock(&self.inner);
        inner.streams.get(stream).map(Tail::next)
    }

    /// Forgets a stream (it was found corrupt).
    pub fn forget(&self, stream: &str) {
        let mut inner = lock(&self.inner);
        let key = inner.streams.keys().find(|k| k.as_str() == stream).cloned();
        if let Some(tail) = key.and_then(|key| inner.streams.remove(&key)) {
            inner.bytes -= tail.bytes;
        }
    }
}

impl Inner {
    /// Lets the streams extended longest ago go to `retired` while over
    /// [`RECENT_BYTES`], up to the first holding a record sled lacks.
    fn evict(&mut self, indexed_below: u64, retired: &mut Vec<Record>) {
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
                retired.extend(tail.records);
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
    use crate::record::{FORMAT_VERSION, Header, encode};

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

    fn positions(records: &[Record]) -> Vec<u64> {
        records.iter().map(Record::position).collect()
    }

    #[test]
    fn reads_what_it_holds_and_nothing_else() {
        let recent = Recent::default();
        let mut retired = Vec::new();
        let s = StreamKey::new("r/s").unwrap();
        assert!(recent.read(&s, 0, usize::MAX).is_none());
        recent.extend(
            &[(s.clone(), vec![record(&s, 3), record(&s, 4)])],
            u64::MAX,
            &mut retired,
        );
        assert_eq!(recent.head(&s), Some(5));
        let held = |l: Option<Vec<Record>>| l.as_deref().map(positions);
        assert_eq!(held(recent.read(&s, 4, usize::MAX)), Some(vec![4]));
        assert_eq!(held(recent.read(&s, 5, usize::MAX)), Some(vec![]));
        assert_eq!(held(recent.read(&s, 2, usize::MAX)), None);
        assert_eq!(held(recent.read(&s, 6, usize::MAX)), None);
        // Below twice the bound, nothing goes.
        let keep = RECENT_RECORDS_PER_STREAM as u64;
        let some: Vec<Record> = (5..2 * keep + 2).map(|p| record(&s, p)).collect();
        recent.extend(&[(s.clone(), some)], u64::MAX, &mut retired);
        assert!(retired.is_empty());
        assert_eq!(
            held(recent.read(&s, 3, usize::MAX)).map(|p| p.len() as u64),
            Some(2 * keep - 1)
        );
        // At twice the bound, the older records go to `retired`, in order.
        recent.extend(
            &[(s.clone(), vec![record(&s, 2 * keep + 2)])],
            u64::MAX,
            &mut retired,
        );
        assert_eq!(positions(&retired), (3..keep + 3).collect::<Vec<_>>());
        assert_eq!(held(recent.read(&s, keep + 2, usize::MAX)), None);
        assert_eq!(
            held(recent.read(&s, keep + 3, usize::MAX)).map(|p| p.len() as u64),
            Some(keep)
        );
        recent.forget("r/s");
        assert_eq!(recent.head(&s), None);
    }

    /// The indexer's backlog: records sled lacks stay, past both bounds,
    /// and go once sled holds them.
    #[test]
    fn records_sled_lacks_are_kept_past_the_bounds() {
        let recent = Recent::default();
        let mut retired = Vec::new();
        let s = StreamKey::new("r/unindexed").unwrap();
        let over = RECENT_RECORDS_PER_STREAM as u64 * 2;
        let many: Vec<Record> = (0..over).map(|p| record(&s, p)).collect();
        // Nothing below global 0 is in sled: every record stays.
        recent.extend(&[(s.clone(), many)], 0, &mut retired);
        assert!(retired.is_empty());
        let held = |from| recent.read(&s, from, usize::MAX).map(|r| r.len() as u64);
        assert_eq!(held(0), Some(over));
        // sled holds the first quarter now: the next round lets go of
        // that much only, though the bound would let go of half.
        let next = record(&s, over);
        recent.extend(&[(s.clone(), vec![next])], over / 4, &mut retired);
        assert_eq!(positions(&retired), (0..over / 4).collect::<Vec<_>>());
        assert_eq!(held(over / 4 - 1), None);
        assert_eq!(held(over / 4), Some(over * 3 / 4 + 1));

        // Past the byte bound, a stream sled lacks records of stays.
        retired.clear();
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
        recent.extend(&[(big.clone(), chunk.clone())], 1_000, &mut retired);
        assert_eq!(recent.head(&big), Some(chunk.len() as u64));
        assert_eq!(
            recent.head(&s),
            None,
            "the older stream sled holds went first"
        );
        assert_eq!(
            positions(&retired),
            (over / 4..over + 1).collect::<Vec<_>>(),
            "the evicted stream's records were handed back, not dropped"
        );
    }
}
