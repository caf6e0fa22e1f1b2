//! The operator commands behind `ledgerwire log …`: verify, dump, stats and
//! probe. Each writes plain text or JSON lines to the writer it is given,
//! so tests run them without a process.
//! Must never: repair or rewrite a store; they read it (probe only appends).

use std::io::Write;
use std::path::Path;

use serde_json::json;

use crate::ledger::kinds::{self, RecordKind};
use crate::ledger::probe::Probe;
use crate::ledger::{
    Durability, ExpectedPosition, Ledger, LedgerError, OpenMode, Payload, Record, StreamKey,
    VerifyReport,
};

/// Errors of the operator commands.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error("cannot write output: {0}")]
    Output(#[from] std::io::Error),
    #[error("the store has {0} problem(s); see the lines above")]
    Problems(usize),
    /// `replay --check`: segments whose frames the agent no longer yields.
    #[error("{0} segment(s) differ from what was recorded; see the lines above")]
    Differs(usize),
    /// A failure already worded for the operator (server start-up, a
    /// conversation not found, the chat client).
    #[error("{0}")]
    Failed(String),
}

/// Opens an existing store for reading.
fn open_existing(data: &Path) -> Result<(Ledger, VerifyReport), ToolError> {
    Ok(Ledger::open(data, OpenMode::MustExist)?)
}

/// Prints the integrity report; fails if the store has any problem.
pub fn verify(data: &Path, out: &mut impl Write) -> Result<VerifyReport, ToolError> {
    let (_ledger, report) = open_existing(data)?;
    for problem in &report.problems {
        writeln!(
            out,
            "CORRUPT stream={} position={}: {}",
            problem.stream.as_deref().unwrap_or("?"),
            problem
                .position
                .map_or_else(|| String::from("?"), |p| p.to_string()),
            problem.problem
        )?;
    }
    writeln!(
        out,
        "{}: {} records in {} streams, {} bytes, next global position {}",
        if report.is_clean() { "ok" } else { "FAILED" },
        report.records,
        report.streams,
        report.bytes,
        report.next_global
    )?;
    if report.is_clean() {
        Ok(report)
    } else {
        Err(ToolError::Problems(report.problems.len()))
    }
}

/// One record as a JSON line.
fn record_json(record: &Record) -> serde_json::Value {
    let kind_name = RecordKind::from_code(record.kind()).map(RecordKind::name);
    let mut line = json!({
        "global_position": record.global_position(),
        "stream": record.stream(),
        "position": record.position(),
        "timestamp_ms": record.timestamp_ms(),
        "format_version": record.header().format_version,
        "kind": record.kind(),
        "kind_name": kind_name,
        "crc32c": format!("{:08x}", record.crc()),
    });
    match kinds::payload_json(record) {
        Ok(payload) => line["payload"] = payload,
        Err(error) => line["payload_error"] = json!(error.to_string()),
    }
    line
}

/// Prints records as JSON lines: one stream from `from`, or every stream in
/// global order from global position `from`.
pub fn dump(
    data: &Path,
    stream: Option<&str>,
    from: u64,
    out: &mut impl Write,
) -> Result<(), ToolError> {
    let (ledger, _report) = open_existing(data)?;
    dump_ledger(&ledger, stream, from, out)
}

/// [`dump`] over an open ledger.
pub fn dump_ledger(
    ledger: &Ledger,
    stream: Option<&str>,
    from: u64,
    out: &mut impl Write,
) -> Result<(), ToolError> {
    if let Some(stream) = stream {
        let stream = StreamKey::new(stream)?;
        for record in ledger.read(&stream, from)? {
            writeln!(out, "{}", record_json(&record?))?;
        }
        return Ok(());
    }
    let mut records = Vec::new();
    for stream in ledger.streams() {
        for record in ledger.read(&stream?, 0)? {
            let record = record?;
            if record.global_position() >= from {
                records.push(record);
            }
        }
    }
    records.sort_by_key(Record::global_position);
    for record in &records {
        writeln!(out, "{}", record_json(record))?;
    }
    Ok(())
}

/// Prints record counts, bytes, streams and counts per kind.
pub fn stats(data: &Path, out: &mut impl Write) -> Result<(), ToolError> {
    // The integrity scan of the open already counted every kind.
    let (_ledger, report) = open_existing(data)?;
    writeln!(out, "records          {}", report.records)?;
    writeln!(out, "bytes            {}", report.bytes)?;
    writeln!(out, "streams          {}", report.streams)?;
    writeln!(out, "next global      {}", report.next_global)?;
    writeln!(out, "corrupt streams  {}", report.corrupt_streams().len())?;
    for (&code, &(count, bytes)) in &report.kinds {
        let kind = RecordKind::from_code(code)
            .map_or_else(|| format!("unknown-{code}"), |kind| kind.name().to_owned());
        writeln!(out, "kind {kind:<30} {count} records, {bytes} bytes")?;
    }
    Ok(())
}

/// Settings of `ledgerwire log probe`.
#[derive(Clone, Debug)]
pub struct ProbeConfig {
    /// Concurrent writers; writer `w` appends to stream `probe/<w>`.
    pub writers: u32,
    /// Records per writer.
    pub count: u64,
    /// Filler bytes per record.
    pub filler_bytes: usize,
    pub durability: Durability,
}

/// Most concurrent probe writers.
pub const MAX_PROBE_WRITERS: u32 = 256;

/// Appends probe records, one at a time per writer, printing
/// `ack <writer> <position>` after each acknowledged append. Writers
/// continue the streams where earlier runs left them.
pub fn probe(data: &Path, config: &ProbeConfig) -> Result<(), ToolError> {
    let (ledger, _report) = Ledger::open(data, OpenMode::CreateIfMissing)?;
    let writers = config.writers.clamp(1, MAX_PROBE_WRITERS);
    let stdout = std::sync::Mutex::new(std::io::stdout());
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..writers)
            .map(|writer| {
                let (ledger, stdout) = (&ledger, &stdout);
                scope.spawn(move || probe_writer(ledger, writer, config, stdout))
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().unwrap_or(Ok(())))
            .collect::<Result<Vec<()>, ToolError>>()
    })?;
    Ok(())
}

fn probe_writer(
    ledger: &Ledger,
    writer: u32,
    config: &ProbeConfig,
    stdout: &std::sync::Mutex<std::io::Stdout>,
) -> Result<(), ToolError> {
    let stream = StreamKey::new(format!("probe/{writer}"))?;
    let mut position = ledger.head(&stream)?;
    for _ in 0..config.count {
        let record = Probe::new(writer, position, config.filler_bytes).to_record();
        let outcome = ledger.append_blocking(
            &stream,
            ExpectedPosition::Exactly(position),
            vec![record],
            config.durability,
        )?;
        let mut out = stdout.lock().unwrap_or_else(|p| p.into_inner());
        writeln!(out, "ack {writer} {}", outcome.first_position)?;
        out.flush()?;
        position = outcome.next_position;
    }
    Ok(())
}

/// Prints a Studio conversation from the ledger alone: every frame in
/// order, grouped by segment, exactly as sent (`id:`/`data:` lines), then
/// the conversation's folded state as JSON.
pub fn replay(
    data: &Path,
    conversation: &str,
    principal: Option<&str>,
    out: &mut impl Write,
) -> Result<(), ToolError> {
    use crate::studio::conversation::ConversationFold;
    use crate::studio::records::{FrameSent, SegmentClaimed, SegmentReleased};

    let (ledger, _report) = open_existing(data)?;
    let stream = find_conversation(&ledger, conversation, principal)?;
    for record in ledger.read(&stream, 0)? {
        let record = record?;
        if let Some(Ok(claim)) = SegmentClaimed::from_record(&record) {
            writeln!(
                out,
                "# segment {} (turn {}, first seq {}, owner {})",
                claim.segment, claim.turn, claim.first_seq, claim.owner
            )?;
        } else if let Some(Ok(frame)) = FrameSent::from_record(&record) {
            writeln!(out, "id: {}\ndata: {}\n", frame.seq, frame.frame)?;
        } else if let Some(Ok(release)) = SegmentReleased::from_record(&record) {
            writeln!(
                out,
                "# segment {} ended: {:?}",
                release.segment, release.end
            )?;
        }
    }
    let folded = ledger.fold::<ConversationFold>(&stream)?;
    let state = serde_json::to_string_pretty(&folded.state).unwrap_or_default();
    writeln!(out, "# state after {} records\n{state}", folded.position)?;
    Ok(())
}

/// Runs every recorded segment of a conversation through `agent` again and
/// prints, per segment, whether the agent's frames are the recorded ones.
/// Fails (exit 1) when any differs.
pub async fn replay_check(
    data: &Path,
    conversation: &str,
    principal: Option<&str>,
    agent: &dyn crate::agent::Agent,
    out: &mut impl Write,
) -> Result<(), ToolError> {
    use crate::studio::rerun::{CheckOutcome, check_segments};

    let (ledger, _report) = open_existing(data)?;
    let stream = find_conversation(&ledger, conversation, principal)?;
    let records = ledger.read(&stream, 0)?.collect::<Result<Vec<_>, _>>()?;
    let checks = check_segments(records, agent)
        .await
        .map_err(|error| ToolError::Failed(format!("the conversation does not fold: {error}")))?;
    let mut differing = 0;
    for check in &checks {
        let head = format!(
            "segment {} (turn {}, {} agent frames)",
            check.segment, check.turn, check.recorded
        );
        match &check.outcome {
            CheckOutcome::Same => writeln!(out, "{head}: same")?,
            CheckOutcome::Skipped => {
                writeln!(out, "{head}: skipped (re-planned an unreadable plan)")?;
            }
            CheckOutcome::Differs {
                index,
                recorded,
                now,
            } => {
                differing += 1;
                let none = || String::from("(none)");
                writeln!(out, "{head}: DIFFERS at agent frame {index}")?;
                writeln!(out, "  recorded: {}", recorded.clone().unwrap_or_else(none))?;
                writeln!(out, "  now:      {}", now.clone().unwrap_or_else(none))?;
            }
        }
    }
    if differing > 0 {
        return Err(ToolError::Differs(differing));
    }
    writeln!(
        out,
        "{} segment(s): the log reproduces every one",
        checks.len()
    )?;
    Ok(())
}

/// The stream of a conversation id, for one principal or the only one
/// holding that id.
fn find_conversation(
    ledger: &Ledger,
    conversation: &str,
    principal: Option<&str>,
) -> Result<StreamKey, ToolError> {
    if let Some(principal) = principal {
        return Ok(StreamKey::new(format!(
            "studio/{principal}/{conversation}"
        ))?);
    }
    let mut found = Vec::new();
    for stream in ledger.streams() {
        let stream = stream?;
        let Some(rest) = stream.as_str().strip_prefix("studio/") else {
            continue;
        };
        if rest
            .split_once('/')
            .is_some_and(|(_, id)| id == conversation)
        {
            found.push(stream);
        }
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(ToolError::Failed(format!(
            "no conversation {conversation:?} in this store"
        ))),
        _ => Err(ToolError::Failed(format!(
            "conversation {conversation:?} exists for several principals ({}); pass --principal",
            found
                .iter()
                .map(|s| s.as_str().split('/').nth(1).unwrap_or("?").to_owned())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}
