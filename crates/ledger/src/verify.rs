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

use crate::error::{Corruption, LedgerError, Result};
use crate::record::Record;

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
/// global positions unique and increasing, and (when the store's are
/// `dense`) none missing below the last one seen.
pub async fn check_global_order(
    mut records: BoxStream<'static, Result<Record>>,
    dense: bool,
) -> Result<VerifyReport> {
    let mut report = VerifyReport::default();
    let mut streams: HashMap<String, StreamCheck> = HashMap::new();
    // The scan is in global order, so the record before tells whether a
    // global position is repeated or (in a dense store) skipped.
    let mut previous: Option<u64> = None;
    let mut first_hole = None;
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
        let expected = previous.map_or(0, |previous| previous + 1);
        if first_hole.is_none() && global > expected {
            first_hole = Some(expected);
        }
        judge(&mut report, &mut streams, previous, &record);
        previous = Some(previous.map_or(global, |previous| previous.max(global)));
        end = end.max(global + 1);
    }
    report.streams = streams.len() as u64;
    report.next_global = end;
    // Every global position below the end belongs to one record of a
    // dense store; a hole is a record gone from a stream nobody can name.
    // A damaged stream loses its later records' positions too, so look
    // only when nothing else was found.
    if dense
        && report.problems.is_empty()
        && let Some(global) = first_hole
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
    previous_in_scan: Option<u64>,
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
    let found = if previous_in_scan == Some(global) {
        Some(Corruption::GlobalDuplicate { global })
    } else if let Some(previous) = previous_in_scan.filter(|&previous| global < previous) {
        Some(Corruption::GlobalOrder { global, previous })
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
