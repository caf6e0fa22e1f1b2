//! The operator commands behind `ledgerwire log …` (verify, dump, stats,
//! probe) and `ledgerwire replay`. Each writes plain text or JSON lines
//! to the writer it is given, so tests run them without a process, and
//! each works over any store through the neutral [`Ledger`]; only the
//! local store's offline checks of its own files open it directly.
//! `stores` runs verify, stats and probe on whichever store the operator
//! named; `copy` copies a store into another (`log copy`).
//! Owns: what each command prints and the exit it implies ([`ToolError`]).
//! Must never: repair or rewrite a store; they read it (probe appends,
//! and copy writes only into an empty destination).

mod copy;
mod stores;

pub use copy::{CopyReport, copy};
pub use stores::{probe_store, stats_store, verify_store};

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use futures_util::{Stream, StreamExt};
use serde_json::json;

use crate::ledger::kinds;
use crate::ledger::local::{LocalError, LocalStore, OpenMode};
use crate::ledger::probe::Probe;
use crate::ledger::{
    Durability, ExpectedPosition, Ledger, LedgerError, Payload, Record, StreamKey, VerifyReport,
};
use crate::record_kinds::registry;

/// Errors of the operator commands.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    Store(#[from] LocalError),
    #[error(transparent)]
    Postgres(#[from] crate::ledger::postgres::PostgresError),
    #[error(transparent)]
    Open(#[from] crate::store::OpenError),
    #[error(transparent)]
    Choice(#[from] crate::store::StoreChoiceError),
    #[error("cannot write output: {0}")]
    Output(#[from] std::io::Error),
    #[error("the store has {0} problem(s); see the lines above")]
    Problems(usize),
    /// `replay --check`: segments whose frames the agent no longer yields.
    #[error("{0} segment(s) differ from what was recorded; see the lines above")]
    Differs(usize),
    /// What the command names (a stream, a conversation) is not in the store.
    #[error("{0}")]
    NotFound(String),
    /// A conversation id several principals hold, given without one.
    #[error("{0}")]
    Ambiguous(String),
    /// A running server's check failed (`--url`); its sentence.
    #[error("{0}")]
    Remote(String),
    /// `crashtest`: acknowledged items lost or changed.
    #[error("{0} loss(es) found; see the LOST lines above")]
    Lost(usize),
    /// `bench`: conversations asked for that did not complete.
    #[error("{0} conversation(s) did not complete; see the report above")]
    Incomplete(u64),
    /// A failure already worded for the operator (server start-up, a
    /// conversation not found, the chat client).
    #[error("{0}")]
    Failed(String),
}

/// Opens an existing local store, checking every record.
fn open_existing(data: &Path) -> Result<(Ledger, VerifyReport), ToolError> {
    let (store, report) = LocalStore::open(data, OpenMode::MustExist)?;
    Ok((Ledger::new(Arc::new(store)), report))
}

/// Prints the integrity report of a local store, its journal files
/// included; fails if the store has any problem.
pub fn verify(data: &Path, out: &mut impl Write) -> Result<VerifyReport, ToolError> {
    // The journal first, as it is: opening settles its newest file.
    let journal = verify_journal(data, out)?;
    // Opening rebuilds a damaged index from the journal (said below);
    // damage it cannot rebuild past is a finding.
    let (store, report) = match LocalStore::open(data, OpenMode::MustExist) {
        Err(LocalError::Damaged(damage)) => {
            writeln!(out, "DAMAGED: {damage}")?;
            writeln!(out, "FAILED: the store cannot be opened")?;
            return Err(ToolError::Problems(1));
        }
        opened => opened?,
    };
    print_rebuild(&store, out)?;
    let verified = print_verify(report, out);
    for note in &journal.notes {
        writeln!(out, "{note}")?;
    }
    let report = verified?;
    if journal.damaged > 0 {
        writeln!(
            out,
            "FAILED: the journal, where the records live, is damaged; streams whose records lay there are named above as CORRUPT (if none is, the damage touched no record); check the disk and restore the store from a backup"
        )?;
        return Err(ToolError::Problems(journal.damaged));
    }
    Ok(report)
}

/// Sets the index of the local store in `data` aside, rebuilds it from
/// the journal and prints the rebuild and the integrity report; fails if
/// the journal is damaged or a record does not check.
pub fn repair(data: &Path, out: &mut impl Write) -> Result<(), ToolError> {
    let (store, report) = match LocalStore::repair(data) {
        Err(LocalError::Damaged(damage)) => {
            writeln!(out, "DAMAGED: {damage}")?;
            writeln!(out, "FAILED: the index cannot be rebuilt")?;
            return Err(ToolError::Problems(1));
        }
        opened => opened?,
    };
    print_rebuild(&store, out)?;
    print_verify(report, out).map(drop)
}

/// The line saying the open rebuilt the index, if it did.
fn print_rebuild(store: &LocalStore, out: &mut impl Write) -> Result<(), ToolError> {
    if let Some(rebuilt) = store.index_rebuilt() {
        writeln!(
            out,
            "index: rebuilt from the journal in {} ms ({} records, {} rounds, {} bytes of journal read; why: {}){}",
            rebuilt.elapsed.as_millis(),
            rebuilt.records,
            rebuilt.rounds,
            rebuilt.journal_bytes,
            rebuilt.found,
            rebuilt
                .set_aside
                .as_ref()
                .map(|dir| format!("; the old index is in {}", dir.display()))
                .unwrap_or_default()
        )?;
    }
    Ok(())
}

/// What `log verify` found in the journal.
struct JournalFindings {
    damaged: usize,
    /// Lines printed after the report: a torn tail, the files read.
    notes: Vec<String>,
}

/// Checks every journal file's header and entries (checksums, global
/// positions, continuity between files), printing damage by file and
/// byte offset at once and keeping a torn tail and a summary as notes.
fn verify_journal(data: &Path, out: &mut impl Write) -> Result<JournalFindings, ToolError> {
    let scans = crate::ledger::local::journal::scan(data)?;
    let mut findings = JournalFindings {
        damaged: 0,
        notes: Vec::new(),
    };
    for scan in &scans {
        for damage in &scan.damage {
            writeln!(
                out,
                "DAMAGED journal file={} offset={}: {}",
                damage.file.display(),
                damage.offset,
                damage.detail
            )?;
            findings.damaged += 1;
        }
        if let Some(offset) = scan.torn_at {
            findings.notes.push(format!(
                "journal: file={} ends in a torn entry at offset={} (written after the last sync when the process stopped: nothing there was acknowledged; dropped)",
                scan.path.display(),
                offset
            ));
        }
    }
    Ok(findings)
}

/// Prints a verification's report as `log verify` does; fails if it found
/// any problem.
pub fn print_verify(report: VerifyReport, out: &mut impl Write) -> Result<VerifyReport, ToolError> {
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
        writeln!(
            out,
            "what to do: restore the store from a backup; until then `serve` refuses the damaged streams and serves the others"
        )?;
        Err(ToolError::Problems(report.problems.len()))
    }
}

/// One record as a JSON line.
fn record_json(record: &Record) -> serde_json::Value {
    let kind_name = registry().name(record.kind());
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
    match registry().payload_json(record) {
        Ok(payload) => line["payload"] = payload,
        Err(error) => line["payload_error"] = json!(error.to_string()),
    }
    line
}

/// Prints a store's records as JSON lines: one stream from `from`, or
/// every stream in global order from global position `from`.
pub async fn dump(
    ledger: &Ledger,
    stream: Option<&str>,
    from: u64,
    out: &mut impl Write,
) -> Result<(), ToolError> {
    let mut lines = std::pin::pin!(dump_lines(ledger, stream, from).await?);
    while let Some(line) = lines.next().await {
        writeln!(out, "{}", line?)?;
    }
    Ok(())
}

/// The lines of a dump as they are read (what the audit API streams). A
/// stream that does not exist is refused before the first line.
pub async fn dump_lines(
    ledger: &Ledger,
    stream: Option<&str>,
    from: u64,
) -> Result<impl Stream<Item = Result<String, ToolError>> + Send + use<>, ToolError> {
    let records = match stream {
        Some(stream) => {
            let stream = StreamKey::new(stream)?;
            if ledger.head(&stream).await? == 0 {
                return Err(ToolError::NotFound(format!(
                    "no stream {stream:?} in this store (`log stats` counts the streams it holds)"
                )));
            }
            ledger.read(&stream, from).boxed()
        }
        None => ledger.scan_global(from),
    };
    Ok(records.map(|record| Ok(record_json(&record?).to_string())))
}

/// Prints a local store's record counts, bytes, streams and counts per
/// kind.
pub fn stats(data: &Path, out: &mut impl Write) -> Result<(), ToolError> {
    // The integrity scan of the open already counted every kind.
    let (_ledger, report) = open_existing(data)?;
    print_stats(&report, out)
}

/// Prints a verification's counts as `log stats` does.
pub fn print_stats(report: &VerifyReport, out: &mut impl Write) -> Result<(), ToolError> {
    writeln!(out, "records          {}", report.records)?;
    writeln!(out, "bytes            {}", report.bytes)?;
    writeln!(out, "streams          {}", report.streams)?;
    writeln!(out, "next global      {}", report.next_global)?;
    writeln!(out, "corrupt streams  {}", report.corrupt_streams().len())?;
    for (&code, &(count, bytes)) in &report.kinds {
        let kind = registry()
            .name(code)
            .map_or_else(|| format!("unknown-{code}"), str::to_owned);
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

/// Appends probe records to an open ledger, one at a time per writer,
/// printing `ack <writer> <position> <global>` after each acknowledged
/// append. Writers continue the streams where earlier runs left them
/// (`place` names the store in errors).
pub async fn probe_ledger(
    ledger: &Ledger,
    config: &ProbeConfig,
    place: &Path,
) -> Result<(), ToolError> {
    refuse_foreign_streams(ledger, place).await?;
    let writers = config.writers.clamp(1, MAX_PROBE_WRITERS);
    let stdout = Arc::new(std::sync::Mutex::new(std::io::stdout()));
    let tasks: Vec<_> = (0..writers)
        .map(|writer| {
            let (ledger, stdout, config) = (ledger.clone(), stdout.clone(), config.clone());
            tokio::spawn(async move { probe_writer(&ledger, writer, &config, &stdout).await })
        })
        .collect();
    for task in tasks {
        task.await
            .map_err(|error| ToolError::Failed(format!("a probe writer stopped: {error}")))??;
    }
    Ok(())
}

/// `probe` writes only into a store of probe streams: its records would
/// sit in an operator's audit trail among real conversations.
async fn refuse_foreign_streams(ledger: &Ledger, place: &Path) -> Result<(), ToolError> {
    let mut streams = std::pin::pin!(ledger.streams());
    while let Some(stream) = streams.next().await {
        let stream = stream?;
        if !stream.as_str().starts_with("probe/") {
            return Err(ToolError::Failed(format!(
                "{} holds Studio or Statewire streams (e.g. {stream:?}); \
                 probe writes only into a store of its own: pass another --data",
                place.display()
            )));
        }
    }
    Ok(())
}

async fn probe_writer(
    ledger: &Ledger,
    writer: u32,
    config: &ProbeConfig,
    stdout: &std::sync::Mutex<std::io::Stdout>,
) -> Result<(), ToolError> {
    let stream = StreamKey::new(format!("probe/{writer}"))?;
    let mut position = ledger.head(&stream).await?;
    for _ in 0..config.count {
        let record = Probe::new(writer, position, config.filler_bytes).to_record();
        let outcome = ledger
            .append(
                &stream,
                ExpectedPosition::Exactly(position),
                vec![record],
                config.durability,
            )
            .await?;
        let mut out = stdout.lock().unwrap_or_else(|p| p.into_inner());
        writeln!(
            out,
            "ack {writer} {} {}",
            outcome.first_position, outcome.first_global_position
        )?;
        out.flush()?;
        position = outcome.next_position;
    }
    Ok(())
}

/// Members of a conversation's folded state that hold JSON text, shown
/// as the JSON they hold.
const STATE_JSON_TEXT: &[&[&str]] = &[
    &["turns", "*", "request"],
    &["turns", "*", "pauses", "*", "frame"],
    &["turns", "*", "pauses", "*", "answer"],
    &["applied", "*", "1"],
];

/// Prints a Studio conversation from the ledger alone: every frame in
/// order, grouped by segment, exactly as sent (`id:`/`data:` lines), then
/// the conversation's folded state as JSON (also what the audit API
/// serves).
pub async fn replay(
    ledger: &Ledger,
    conversation: &str,
    principal: Option<&str>,
    out: &mut impl Write,
) -> Result<(), ToolError> {
    use crate::studio::conversation::ConversationFold;
    use crate::studio::records::{FrameSent, SegmentClaimed, SegmentReleased};

    let stream = find_conversation(ledger, conversation, principal).await?;
    let mut records = std::pin::pin!(ledger.read(&stream, 0));
    while let Some(record) = records.next().await {
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
    let folded = ledger.fold::<ConversationFold>(&stream).await?;
    let mut state = serde_json::to_value(&folded.state).unwrap_or_default();
    for path in STATE_JSON_TEXT {
        kinds::nest_json_text(&mut state, path);
    }
    let state = serde_json::to_string_pretty(&state).unwrap_or_default();
    writeln!(out, "# state after {} records\n{state}", folded.position)?;
    Ok(())
}

/// Runs every recorded segment of a conversation through `agent` again and
/// prints, per segment, whether the agent's frames are the recorded ones.
/// Fails (exit 1) when any differs (also what the audit API serves).
pub async fn replay_check(
    ledger: &Ledger,
    conversation: &str,
    principal: Option<&str>,
    agent: &dyn crate::agent::Agent,
    out: &mut impl Write,
) -> Result<(), ToolError> {
    let stream = find_conversation(ledger, conversation, principal).await?;
    let records = ledger.read_to_end(&stream, 0).await?;
    check_records(records, agent, out).await
}

/// `replay --check` with the agent the conversation's segments recorded
/// (loaded from this build; scenario scripts from `scenarios`).
pub async fn replay_check_recorded(
    ledger: &Ledger,
    conversation: &str,
    principal: Option<&str>,
    scenarios: &Path,
    out: &mut impl Write,
) -> Result<(), ToolError> {
    let stream = find_conversation(ledger, conversation, principal).await?;
    let records = ledger.read_to_end(&stream, 0).await?;
    let recorded = recorded_agents(&records);
    let name = match recorded.as_slice() {
        [] => {
            writeln!(
                out,
                "# no agent is recorded for this conversation (written before segments recorded theirs); checking with builtin"
            )?;
            "builtin".to_owned()
        }
        [only] => only.name.clone(),
        several => {
            let names: Vec<String> = several.iter().map(ToString::to_string).collect();
            return Err(ToolError::Failed(format!(
                "the segments were served by several agents ({}); pass --agent to check against one",
                names.join(", ")
            )));
        }
    };
    let agent = crate::agent::by_name(&name, scenarios)
        .map_err(|error| ToolError::Failed(error.to_string()))?
        .ok_or_else(|| {
            ToolError::Failed(format!(
                "the recorded agent {name:?} is not available in this build; pass --agent to check against another"
            ))
        })?;
    check_records(records, agent.as_ref(), out).await
}

/// The agents the segments of a conversation recorded, each once, in the
/// order they first served.
pub fn recorded_agents(records: &[Record]) -> Vec<crate::agent::AgentIdentity> {
    use crate::studio::records::SegmentAgent;
    let mut agents: Vec<crate::agent::AgentIdentity> = Vec::new();
    for record in records {
        if let Some(Ok(served)) = SegmentAgent::from_record(record) {
            let identity = crate::agent::AgentIdentity::new(served.name, served.version);
            if !agents.contains(&identity) {
                agents.push(identity);
            }
        }
    }
    agents
}

/// Runs the recorded segments through `agent` and prints each verdict,
/// after a line naming the agent and those that served.
async fn check_records(
    records: Vec<Record>,
    agent: &dyn crate::agent::Agent,
    out: &mut impl Write,
) -> Result<(), ToolError> {
    use crate::studio::rerun::{CheckOutcome, check_segments};

    let checking = agent.identity();
    let recorded = recorded_agents(&records);
    let served: Vec<String> = recorded.iter().map(ToString::to_string).collect();
    if served.is_empty() {
        writeln!(out, "# checking with {checking}")?;
    } else {
        writeln!(
            out,
            "# checking with {checking}; served by {}",
            served.join(", ")
        )?;
        if recorded.iter().any(|served| *served != checking) {
            writeln!(
                out,
                "# the agent checking is not the one recorded (another agent or version): frames may differ"
            )?;
        }
    }
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
async fn find_conversation(
    ledger: &Ledger,
    conversation: &str,
    principal: Option<&str>,
) -> Result<StreamKey, ToolError> {
    if let Some(principal) = principal {
        let stream = StreamKey::new(format!("studio/{principal}/{conversation}"))?;
        if ledger.head(&stream).await? == 0 {
            return Err(ToolError::NotFound(format!(
                "no conversation {conversation:?} of principal {principal:?} in this store"
            )));
        }
        return Ok(stream);
    }
    let mut found = Vec::new();
    let mut streams = std::pin::pin!(ledger.streams());
    while let Some(stream) = streams.next().await {
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
        0 => Err(ToolError::NotFound(format!(
            "no conversation {conversation:?} in this store"
        ))),
        _ => Err(ToolError::Ambiguous(format!(
            "conversation {conversation:?} exists for several principals ({}); pass --principal",
            found
                .iter()
                .map(|s| s.as_str().split('/').nth(1).unwrap_or("?").to_owned())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}
