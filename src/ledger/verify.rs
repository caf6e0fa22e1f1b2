//! Integrity checking of a whole store: every record's checksum and
//! placement, each stream's continuity and the global order.
//!
//! Owns: the scan behind `Ledger::open` and `ledgerwire log verify`.
//! Must never: modify the store; it only reads and reports.

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;

use crate::ledger::error::{Corruption, LedgerError, Result};
use crate::ledger::record::{self, RECORD_KEY_TAG, Record, StreamKey};

/// One problem found by a verification.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The stream the bad record belongs to, when it can be told.
    pub stream: Option<String>,
    /// The first position of the stream that cannot be trusted.
    pub position: Option<u64>,
    /// What is wrong, in words.
    pub problem: String,
    #[serde(skip)]
    pub corruption: Corruption,
}

/// What a verification found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct VerifyReport {
    pub records: u64,
    /// Bytes of stored record envelopes.
    pub bytes: u64,
    pub streams: u64,
    /// The global position the next append receives.
    pub next_global: u64,
    pub problems: Vec<Problem>,
    /// Intact records and their bytes, by record kind code.
    pub kinds: std::collections::BTreeMap<u16, (u64, u64)>,
}

impl VerifyReport {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }

    /// The first bad position of each stream with a problem.
    pub fn corrupt_streams(&self) -> HashMap<String, (u64, Corruption)> {
        let mut corrupt = HashMap::new();
        for problem in &self.problems {
            if let (Some(stream), Some(position)) = (&problem.stream, problem.position) {
                corrupt
                    .entry(stream.clone())
                    .or_insert((position, problem.corruption.clone()));
            }
        }
        corrupt
    }
}

/// Global positions seen so far, one bit each.
#[derive(Default)]
struct GlobalSet {
    words: Vec<u64>,
}

impl GlobalSet {
    /// Marks `global`; false if it was already marked.
    fn insert(&mut self, global: u64) -> bool {
        let word = (global / 64) as usize;
        if word >= self.words.len() {
            self.words.resize(word + 1, 0);
        }
        let bit = 1u64 << (global % 64);
        let fresh = self.words[word] & bit == 0;
        self.words[word] |= bit;
        fresh
    }

    fn first_missing_below(&self, end: u64) -> Option<u64> {
        (0..end).find(|&global| {
            let word = (global / 64) as usize;
            self.words
                .get(word)
                .is_none_or(|w| w & (1u64 << (global % 64)) == 0)
        })
    }
}

/// The per-stream part of the scan.
struct StreamScan {
    name: String,
    expected_position: u64,
    last_global: Option<u64>,
    /// Set once a problem is found: later records are not judged again.
    broken: bool,
    /// Set at the first record appended after a live scan began: it and
    /// the stream's later records are not judged.
    beyond_horizon: bool,
}

/// Scans the whole log tree.
pub fn verify(log: &sled::Tree) -> Result<VerifyReport> {
    let never = AtomicBool::new(false);
    Ok(scan(log, &never, None)?.unwrap_or_default())
}

/// Records scanned between two looks at the stop flag.
const STOP_CHECK_RECORDS: u64 = 4096;

/// [`verify`] while appends go on (the scrubber), giving up (`None`) once
/// `stop` is set. It judges only the records that existed when it began,
/// those below the global position stored then: a round's records and
/// that position are one atomic batch, so every record below it is
/// visible, while records appended during the scan may be seen in part
/// (one stream's but not another's) and would look like a hole.
pub fn verify_live(log: &sled::Tree, stop: &AtomicBool) -> Result<Option<VerifyReport>> {
    let horizon = super::stored_next_global(log)?;
    scan(log, stop, Some(horizon))
}

/// The scan: every record, or with a `horizon` every record whose global
/// position is below it.
fn scan(log: &sled::Tree, stop: &AtomicBool, horizon: Option<u64>) -> Result<Option<VerifyReport>> {
    let stored_next_global = super::stored_next_global(log)?;
    let mut report = VerifyReport::default();
    let mut globals = GlobalSet::default();
    let mut max_global: Option<u64> = None;
    let mut current: Option<StreamScan> = None;
    let mut seen: u64 = 0;
    for entry in log.scan_prefix([RECORD_KEY_TAG]) {
        let (key, value) = entry?;
        seen += 1;
        if seen.is_multiple_of(STOP_CHECK_RECORDS) && stop.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let Some((stream, position)) = record::parse_record_key(&key) else {
            report.records += 1;
            report
                .problems
                .push(problem(None, None, Corruption::BadKey));
            continue;
        };
        if current.as_ref().is_none_or(|scan| scan.name != stream) {
            report.streams += 1;
            current = Some(StreamScan {
                name: stream.to_owned(),
                expected_position: 0,
                last_global: None,
                broken: false,
                beyond_horizon: false,
            });
        }
        let Some(scan) = current.as_mut() else {
            continue;
        };
        if scan.beyond_horizon {
            continue;
        }
        let value_len = value.len() as u64;
        let record = Record::decode(value, stream, position);
        if let Ok(record) = &record {
            if horizon.is_some_and(|horizon| record.global_position() >= horizon) {
                scan.beyond_horizon = true;
                continue;
            }
            let count = report.kinds.entry(record.kind()).or_default();
            count.0 += 1;
            count.1 += record.encoded_len() as u64;
            let global = record.global_position();
            max_global = max_global.max(Some(global));
            if !globals.insert(global) && !scan.broken {
                scan.broken = true;
                let corruption = Corruption::GlobalDuplicate { global };
                report
                    .problems
                    .push(problem(Some(stream), Some(position), corruption));
            }
        }
        report.records += 1;
        report.bytes += value_len;
        if scan.broken {
            continue;
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
            continue;
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
    let end = max_global.map_or(0, |g| g + 1);
    report.next_global = end.max(stored_next_global);
    // Every global position below the end was handed to exactly one record;
    // a hole means a record vanished from a stream we cannot name. Torn
    // streams lose their later records' positions too, so only look when
    // nothing else was found. A live scan looks below its horizon only.
    let end = horizon.unwrap_or(end);
    if report.problems.is_empty()
        && let Some(global) = globals.first_missing_below(end)
    {
        let corruption = Corruption::GlobalMissing { global };
        report.problems.push(problem(None, None, corruption));
    }
    Ok(Some(report))
}

fn problem(stream: Option<&str>, position: Option<u64>, corruption: Corruption) -> Problem {
    Problem {
        stream: stream.map(str::to_owned),
        position,
        problem: corruption.to_string(),
        corruption,
    }
}

/// Every distinct stream key, found by seeking past each stream's records.
pub(crate) fn stream_keys(log: sled::Tree) -> impl Iterator<Item = Result<StreamKey>> {
    let mut after: Option<Vec<u8>> = None;
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let start = match &after {
            None => Bound::Included(vec![RECORD_KEY_TAG]),
            Some(bound) => Bound::Excluded(bound.clone()),
        };
        let next = log.range::<Vec<u8>, _>((start, Bound::Unbounded)).next();
        let result = match next {
            None => None,
            Some(Err(error)) => Some(Err(LedgerError::from(error))),
            Some(Ok((key, _))) if key.first() != Some(&RECORD_KEY_TAG) => None,
            Some(Ok((key, _))) => match record::parse_record_key(&key) {
                None => Some(Err(LedgerError::Corrupt {
                    stream: String::from("?"),
                    position: 0,
                    corruption: Corruption::BadKey,
                })),
                Some((stream, _)) => Some(StreamKey::new(stream).inspect(|stream| {
                    let mut bound = record::stream_prefix(stream);
                    bound.extend_from_slice(&u64::MAX.to_be_bytes());
                    after = Some(bound);
                })),
            },
        };
        if !matches!(result, Some(Ok(_))) {
            done = true;
        }
        result
    })
}
