//! Owns: integrity checking of a whole store through its index (each record's
//! checksum and placement, each stream's continuity, the global order), and
//! the global-order merge of the streams. Must never: modify the store.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::local::entry;
use bit_set::BitSet;
use itertools::Itertools;

use crate::error::Corruption;
use crate::local::error::{LocalError, Result};
use crate::local::journal::JournalFiles;
use crate::local::keys::RECORD_KEY_TAG;
use crate::local::{LocalStore, keys};
use crate::record::{Record, StreamKey};
use crate::verify::{VerifyReport, problem};

/// The per-stream part of the scan.
#[derive(Default)]
struct StreamScan {
    name: String,
    expected_position: u64,
    last_global: Option<u64>,
    /// Set once a problem is found: later records are not judged again.
    broken: bool,
    /// Past a live scan's horizon: the stream's later records go unjudged.
    beyond_horizon: bool,
}

/// Scans the whole log tree.
pub fn verify(log: &sled::Tree, files: &JournalFiles) -> Result<VerifyReport> {
    let never = AtomicBool::new(false);
    Ok(scan(log, files, &never, None)?.unwrap_or_default())
}

/// Entries scanned between looks at the stop flag: at most 1 MiB of records,
/// so a closing ledger waits for its scrubber about a millisecond.
const STOP_CHECK_ENTRIES: u64 = 16;

/// [`verify`] while appends go on (the scrubber; `None` once `stop` is set),
/// below the end stored as it began (later ones could look like a hole).
pub fn verify_live(
    log: &sled::Tree,
    files: &JournalFiles,
    stop: &AtomicBool,
) -> Result<Option<VerifyReport>> {
    let horizon = super::stored_next_global(log)?;
    scan(log, files, stop, Some(horizon))
}

/// The scan of every record (below `horizon`, if given).
fn scan(
    log: &sled::Tree,
    files: &JournalFiles,
    stop: &AtomicBool,
    horizon: Option<u64>,
) -> Result<Option<VerifyReport>> {
    let stored_next_global = super::stored_next_global(log)?;
    let mut scan = Scan {
        horizon,
        ..Scan::default()
    };
    let mut seen: u64 = 0;
    for item in log.scan_prefix([RECORD_KEY_TAG]) {
        let (key, value) = match item {
            Ok(entry) => entry,
            // The index cannot be read on: its damage (an open rebuilds it
            // where the journal allows), named once.
            Err(error) if super::error::is_damage(&error) => {
                let detail = error.to_string();
                let corruption = Corruption::Storage { detail };
                scan.report.problems.push(problem(None, None, corruption));
                break;
            }
            Err(error) => return Err(error.into()),
        };
        seen += 1;
        if seen.is_multiple_of(STOP_CHECK_ENTRIES) && stop.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let Some((stream, first)) = keys::parse_record_key(&key) else {
            scan.report.records += 1;
            scan.report
                .problems
                .push(problem(None, None, Corruption::BadKey));
            continue;
        };
        scan.enter(stream);
        for (position, envelope) in (first..).zip(entry::envelopes(value, files)) {
            let len = match &envelope {
                Ok(envelope) => envelope.len(),
                Err(Corruption::Truncated { len }) => *len,
                Err(_) => 0,
            } as u64;
            let record = envelope.and_then(|e| Record::decode(e, stream, position));
            scan.judge(stream, position, len, record);
        }
    }
    Ok(Some(scan.finish(stored_next_global)))
}

/// What the scan has found so far.
#[derive(Default)]
struct Scan {
    horizon: Option<u64>,
    report: VerifyReport,
    /// Global positions seen so far, one bit each.
    globals: BitSet,
    max_global: Option<u64>,
    current: Option<StreamScan>,
}

impl Scan {
    /// An entry of `stream` comes next (a new stream unless the current).
    fn enter(&mut self, stream: &str) {
        if self.current.as_ref().is_none_or(|scan| scan.name != stream) {
            self.report.streams += 1;
            let name = stream.to_owned();
            self.current = Some(StreamScan {
                name,
                ..StreamScan::default()
            });
        }
    }

    /// One record of the current stream at `position` (`len` bytes stored).
    fn judge(
        &mut self,
        stream: &str,
        position: u64,
        len: u64,
        record: std::result::Result<Record, Corruption>,
    ) {
        let Some(scan) = self.current.as_mut() else {
            return;
        };
        let report = &mut self.report;
        if scan.beyond_horizon {
            return;
        }
        if let Ok(record) = &record {
            if self
                .horizon
                .is_some_and(|horizon| record.global_position() >= horizon)
            {
                scan.beyond_horizon = true;
                return;
            }
            let count = report.kinds.entry(record.kind()).or_default();
            count.0 += 1;
            count.1 += record.encoded_len() as u64;
            let global = record.global_position();
            self.max_global = self.max_global.max(Some(global));
            if !self.globals.insert(global as usize) && !scan.broken {
                scan.broken = true;
                let corruption = Corruption::GlobalDuplicate { global };
                report
                    .problems
                    .push(problem(Some(stream), Some(position), corruption));
            }
        }
        report.records += 1;
        report.bytes += len;
        if scan.broken {
            return;
        }
        if position != scan.expected_position {
            scan.broken = true;
            let gap = Corruption::Gap {
                expected: scan.expected_position,
                found: position,
            };
            report
                .problems
                .push(problem(Some(stream), Some(scan.expected_position), gap));
            return;
        }
        scan.expected_position += 1;
        match record {
            Err(corruption) => {
                scan.broken = true;
                report
                    .problems
                    .push(problem(Some(stream), Some(position), corruption));
            }
            Ok(record) => {
                let global = record.global_position();
                if let Some(previous) = scan.last_global
                    && global <= previous
                {
                    scan.broken = true;
                    let corruption = Corruption::GlobalOrder { global, previous };
                    report
                        .problems
                        .push(problem(Some(stream), Some(position), corruption));
                }
                scan.last_global = Some(global);
            }
        }
    }

    fn finish(mut self, stored_next_global: u64) -> VerifyReport {
        let end = self.max_global.map_or(0, |g| g + 1);
        self.report.next_global = end.max(stored_next_global);
        // A hole is a record vanished from a stream we cannot name; looked for
        // only when nothing else was found, below a live scan's horizon.
        let end = self.horizon.unwrap_or(end);
        if self.report.problems.is_empty()
            && let Some(global) = (0..end).find(|&g| !self.globals.contains(g as usize))
        {
            let corruption = Corruption::GlobalMissing { global };
            self.report.problems.push(problem(None, None, corruption));
        }
        self.report
    }
}

/// Every stream key after `after`, in order, seeking past each; ends at errors.
pub(crate) fn stream_keys(
    log: sled::Tree,
    after: Option<&StreamKey>,
) -> impl Iterator<Item = Result<StreamKey>> + use<> {
    let mut from = Some(match after {
        None => Bound::Included(vec![RECORD_KEY_TAG]),
        Some(stream) => Bound::Excluded(past_stream(stream)),
    });
    std::iter::from_fn(move || {
        let (key, _) = match log.range((from.take()?, Bound::Unbounded)).next()? {
            Ok(entry) => entry,
            Err(error) => return Some(Err(error.into())),
        };
        if key.first() != Some(&RECORD_KEY_TAG) {
            return None;
        }
        let Some((stream, _)) = keys::parse_record_key(&key) else {
            return Some(Err(super::corrupt_error("?", 0, Corruption::BadKey)));
        };
        let stream = StreamKey::new(stream).map_err(LocalError::from);
        from = stream
            .as_ref()
            .ok()
            .map(|s| Bound::Excluded(past_stream(s)));
        Some(stream)
    })
}

/// A key past every record key of `stream` and before the next stream's.
fn past_stream(stream: &StreamKey) -> Vec<u8> {
    let mut bound = keys::stream_prefix(stream);
    bound.extend_from_slice(&u64::MAX.to_be_bytes());
    bound
}

/// Every record from global position `from` below the applied end, in global
/// order: a lazy k-way merge of the streams, a page at a time. Blocks.
pub(crate) fn global_order(
    store: &LocalStore,
    from: u64,
) -> Box<dyn Iterator<Item = Result<Record>> + Send> {
    store.wait_until_indexed();
    let horizon = store.shared.applied_next_global();
    let streams = match store.streams_blocking(None).collect::<Result<Vec<_>>>() {
        Ok(streams) => streams,
        Err(error) => return Box::new(std::iter::once(Err(error))),
    };
    let pages = streams.into_iter().map(|stream| StreamPages {
        store: store.clone(),
        stream,
        next: 0,
        page: VecDeque::new(),
        ended: false,
    });
    // An error sorts first: it ends the merge as soon as it is met.
    let global = |item: &Result<Record>| item.as_ref().map_or(0, Record::global_position);
    Box::new(
        pages
            .kmerge_by(move |a, b| global(a) < global(b))
            .filter(move |item| {
                item.as_ref()
                    .map_or(true, |r| (from..horizon).contains(&r.global_position()))
            }),
    )
}

/// One stream a page at a time, no sled iterator held between (not to pin
/// thousands of tree nodes in a merge of thousands of streams).
struct StreamPages {
    store: LocalStore,
    stream: StreamKey,
    next: u64,
    page: VecDeque<Result<Record>>,
    ended: bool,
}

impl StreamPages {
    fn refill(&mut self) {
        let page_records = super::contract::SCAN_PAGE_RECORDS;
        match self.store.read_blocking(&self.stream, self.next) {
            Ok(reader) => self.page.extend(reader.take(page_records)),
            Err(error) => self.page.push_back(Err(error)),
        }
        match self.page.back() {
            Some(Ok(record)) if self.page.len() == page_records => {
                self.next = record.position() + 1;
            }
            _ => self.ended = true,
        }
    }
}

impl Iterator for StreamPages {
    type Item = Result<Record>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.page.is_empty() && !self.ended {
            self.refill();
        }
        self.page.pop_front()
    }
}
