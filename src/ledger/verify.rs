//! Integrity of a whole store, judged the same way for every engine:
//! each record's checksum, each stream's positions and the global order.
//!
//! Owns: the report ([`VerifyReport`], [`Problem`]) and the check of a
//! global-order scan ([`check_global_order`]), which `log verify` on any
//! store and the live audit API run. The local store's offline scan of
//! its own files (`local::scan`) fills the same report.
//! Must never: modify a store; it only reads and reports.

use std::collections::HashMap;

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use serde::Serialize;

use crate::ledger::error::{Corruption, LedgerError, Result};
use crate::ledger::record::Record;

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
pub(crate) struct GlobalSet {
    words: Vec<u64>,
}

impl GlobalSet {
    /// Marks `global`; false if it was already marked.
    pub(crate) fn insert(&mut self, global: u64) -> bool {
        let word = (global / 64) as usize;
        if word >= self.words.len() {
            self.words.resize(word + 1, 0);
        }
        let bit = 1u64 << (global % 64);
        let fresh = self.words[word] & bit == 0;
        self.words[word] |= bit;
        fresh
    }

    pub(crate) fn first_missing_below(&self, end: u64) -> Option<u64> {
        (0..end).find(|&global| {
            let word = (global / 64) as usize;
            self.words
                .get(word)
                .is_none_or(|w| w & (1u64 << (global % 64)) == 0)
        })
    }
}

pub(crate) fn problem(
    stream: Option<&str>,
    position: Option<u64>,
    corruption: Corruption,
) -> Problem {
    Problem {
        stream: stream.map(str::to_owned),
        position,
        problem: corruption.to_string(),
        corruption,
    }
}

/// What a global-order check knows of one stream so far.
struct StreamCheck {
    next_position: u64,
    last_global: Option<u64>,
    /// Set at the stream's first problem: it is judged no further.
    broken: bool,
}

/// Checks a global-order scan: every record's checksum (done as the
/// store hands it out: a record that fails is an error of the scan,
/// reported here as damage), positions 0, 1, 2, … in each stream,
/// global positions unique and increasing, and (for a store whose global
/// positions are `dense`) none missing below the last one seen.
pub async fn check_global_order(
    mut records: BoxStream<'static, Result<Record>>,
    dense: bool,
) -> Result<VerifyReport> {
    let mut report = VerifyReport::default();
    let mut streams: HashMap<String, StreamCheck> = HashMap::new();
    let mut globals = GlobalSet::default();
    let mut end = 0;
    while let Some(record) = records.next().await {
        let record = match record {
            Ok(record) => record,
            Err(LedgerError::Corrupt {
                stream,
                position,
                corruption,
            }) => {
                report
                    .problems
                    .push(problem(Some(&stream), Some(position), corruption));
                continue;
            }
            Err(error) => return Err(error),
        };
        let global = record.global_position();
        // A scan hands records out in global order, so in a store whose
        // global positions leave gaps (too far apart for one bit each) a
        // duplicate is one not above the last.
        let fresh = if dense {
            globals.insert(global)
        } else {
            global >= end
        };
        judge(&mut report, &mut streams, fresh, &record);
        end = end.max(global + 1);
    }
    report.streams = streams.len() as u64;
    report.next_global = end;
    if dense
        && report.problems.is_empty()
        && let Some(global) = globals.first_missing_below(end)
    {
        let corruption = Corruption::GlobalMissing { global };
        report.problems.push(problem(None, None, corruption));
    }
    Ok(report)
}

/// One intact record of a global-order scan.
fn judge(
    report: &mut VerifyReport,
    streams: &mut HashMap<String, StreamCheck>,
    fresh: bool,
    record: &Record,
) {
    report.records += 1;
    report.bytes += record.encoded_len() as u64;
    let count = report.kinds.entry(record.kind()).or_default();
    count.0 += 1;
    count.1 += record.encoded_len() as u64;
    let check = streams
        .entry(record.stream().to_owned())
        .or_insert(StreamCheck {
            next_position: 0,
            last_global: None,
            broken: false,
        });
    let global = record.global_position();
    if check.broken {
        return;
    }
    let found = if !fresh {
        Some(Corruption::GlobalDuplicate { global })
    } else if record.position() != check.next_position {
        Some(Corruption::Gap {
            expected: check.next_position,
            found: record.position(),
        })
    } else {
        check
            .last_global
            .filter(|&previous| global <= previous)
            .map(|previous| Corruption::GlobalOrder { global, previous })
    };
    match found {
        Some(corruption) => {
            check.broken = true;
            let position = match corruption {
                Corruption::Gap { expected, .. } => expected,
                _ => record.position(),
            };
            report
                .problems
                .push(problem(Some(record.stream()), Some(position), corruption));
        }
        None => {
            check.next_position += 1;
            check.last_global = Some(global);
        }
    }
}
