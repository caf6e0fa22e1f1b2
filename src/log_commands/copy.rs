//! `ledgerwire log copy --from SRC --to DST`: a store copied into an empty
//! one of either kind (a directory or a `postgres://` URL), record for
//! record, then checked against the source.
//!
//! Owns: the copy and its check. Each stream is copied in order, up to
//! [`MAX_RECORDS_PER_APPEND`] records an append, at the source's
//! positions, with each record's kind, payload and timestamp. Global
//! positions are the destination's own. The check reads every stream of
//! both stores again and compares every record (stream, position, kind,
//! payload, timestamp), compares the counts, and verifies the
//! destination.
//! Must never: write into a store that holds a stream, or change the
//! source.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use futures_util::StreamExt;

use super::{ToolError, print_verify};
use crate::ledger::local::{LocalStore, OpenMode};
use crate::ledger::postgres::is_postgres_url;
use crate::ledger::{Ledger, MAX_RECORDS_PER_APPEND, StreamKey};
use crate::store::{Opening, StoreChoice};

/// What a copy wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CopyReport {
    pub streams: u64,
    pub records: u64,
    pub bytes: u64,
}

/// A location as an operator may print it (never a password).
fn describe(location: &str) -> String {
    if is_postgres_url(location) {
        crate::ledger::postgres::PostgresSettings::from_url(location)
            .map_or_else(|_| "a PostgreSQL database".to_owned(), |s| s.describe())
    } else {
        location.to_owned()
    }
}

/// The database at `url`.
fn database(url: &str) -> Result<StoreChoice, ToolError> {
    Ok(StoreChoice::new(Default::default(), Some(url))?)
}

/// Opens the source: a local store checked whole, or a database.
async fn open_source(from: &str, out: &mut impl Write) -> Result<Ledger, ToolError> {
    if is_postgres_url(from) {
        return Ok(database(from)?.open(Opening::Existing).await?);
    }
    let (store, report) = LocalStore::open(Path::new(from), OpenMode::MustExist)?;
    if !report.is_clean() {
        writeln!(out, "the source {from} is damaged; nothing was copied:")?;
        print_verify(report, out)?;
    }
    Ok(Ledger::new(Arc::new(store)))
}

/// Opens the destination, refusing one that holds any stream.
async fn open_destination(to: &str) -> Result<Ledger, ToolError> {
    let destination = StoreChoice::new(Path::new(to).to_path_buf(), Some(to))?
        .open(Opening::Create)
        .await?;
    let held = destination.store().streams(None, 1).await?;
    if let Some(stream) = held.first() {
        return Err(ToolError::Failed(format!(
            "{} already holds streams (e.g. {:?}); log copy writes only into an empty store",
            describe(to),
            stream.as_str()
        )));
    }
    Ok(destination)
}

/// Copies `from` into the empty store `to`, checks the copy and prints
/// what it did; fails if the check finds any difference.
pub async fn copy(from: &str, to: &str, out: &mut impl Write) -> Result<CopyReport, ToolError> {
    let source = open_source(from, out).await?;
    let destination = open_destination(to).await?;
    writeln!(out, "copying {} into {}", describe(from), describe(to))?;
    let mut report = CopyReport::default();
    let mut streams = std::pin::pin!(source.streams());
    while let Some(stream) = streams.next().await {
        let stream = stream?;
        copy_stream(&source, &destination, &stream, &mut report).await?;
    }
    destination.flush().await?;
    writeln!(
        out,
        "copied {} records in {} streams, {} bytes; checking the copy",
        report.records, report.streams, report.bytes
    )?;
    check(&source, &destination, &report).await?;
    let verified = destination.verify().await?;
    print_verify(verified, out)?;
    writeln!(out, "ok: the copy holds every record of the source")?;
    Ok(report)
}

async fn copy_stream(
    source: &Ledger,
    destination: &Ledger,
    stream: &StreamKey,
    report: &mut CopyReport,
) -> Result<(), ToolError> {
    report.streams += 1;
    let mut at = 0;
    loop {
        let page = source.read_page(stream, at, MAX_RECORDS_PER_APPEND).await?;
        if page.is_empty() {
            return Ok(());
        }
        destination.store().append_copies(stream, at, &page).await?;
        at += page.len() as u64;
        report.records += page.len() as u64;
        report.bytes += page.iter().map(|r| r.encoded_len() as u64).sum::<u64>();
        if page.len() < MAX_RECORDS_PER_APPEND {
            return Ok(());
        }
    }
}

/// Reads both stores again and compares every record and the counts.
async fn check(source: &Ledger, copy: &Ledger, copied: &CopyReport) -> Result<(), ToolError> {
    let mut found = CopyReport::default();
    let mut streams = std::pin::pin!(copy.streams());
    while let Some(stream) = streams.next().await {
        let stream = stream?;
        found.streams += 1;
        let mut originals = std::pin::pin!(source.read(&stream, 0));
        let mut copies = std::pin::pin!(copy.read(&stream, 0));
        loop {
            let (original, copied) = (originals.next().await, copies.next().await);
            let (original, copied) = match (original, copied) {
                (None, None) => break,
                (Some(original), Some(copied)) => (original?, copied?),
                _ => {
                    return Err(ToolError::Failed(format!(
                        "the copy of {stream} holds a different number of records than the source"
                    )));
                }
            };
            let same = original.stream() == copied.stream()
                && original.position() == copied.position()
                && original.kind() == copied.kind()
                && original.payload() == copied.payload()
                && original.timestamp_ms() == copied.timestamp_ms();
            if !same {
                return Err(ToolError::Failed(format!(
                    "the copy of {stream} #{} differs from the source",
                    original.position()
                )));
            }
            found.records += 1;
        }
    }
    if (found.streams, found.records) != (copied.streams, copied.records) {
        return Err(ToolError::Failed(format!(
            "the copy holds {} records in {} streams, the source {} in {}",
            found.records, found.streams, copied.records, copied.streams
        )));
    }
    Ok(())
}
