//! Lanes: the order commands are admitted in. A durable lane (one per
//! client, thread and protocol) admits a run of commands with one durable
//! append at the lane's exact head, finishes whatever is admitted and
//! unanswered first, and answers a re-sent seq from what it retained. An
//! ephemeral lane lives in its attach: a watermark and retained answers.
//!
//! Owns: the lanes' folds and locks, admission order, sequence checks and
//! duplicates. Must never: dispatch a command before its admission is on
//! disk, admit a seq past a gap, or answer a lane out of seq order.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::ids::ProtocolName;
use crate::negotiation::Record;
use crate::packet::{Answer, Command, Contract, Dur, FrameViolation, Packet, Rejection};
use crate::records::{
    CommandAdmitted, Json, LaneFold, LaneState, MAX_RETAINED_ANSWERS_PER_LANE, PendingCommand,
    lane_stream,
};
use ledgerwire_foundations::telemetry::STATEWIRE_ADMISSIONS;
use ledgerwire_ledger::{
    Durability, ExpectedPosition, FoldCache, Folded, Ledger, LedgerError, Payload, StreamKey,
};

use super::answers::{self, answer, expired, gap};
use super::attaches::Attaches;
use super::execute::{Executor, Statement};
use super::failure::{HostError, server_violation};
use super::registry::Registry;
use super::sync::lock;
use super::thread::Attach;
use super::thread::Thread;
use super::views::Views;

/// Most admission attempts of one batch under concurrent admission.
pub const MAX_ADMIT_ATTEMPTS: usize = 8;

/// Admits commands on their lanes and hands them to the executor.
pub(super) struct Lanes {
    ledger: Ledger,
    registry: Arc<Registry>,
    attaches: Arc<Attaches>,
    views: Arc<Views>,
    executor: Arc<Executor>,
    lanes: FoldCache<LaneFold>,
}

impl Lanes {
    pub(super) fn new(
        ledger: Ledger,
        registry: Arc<Registry>,
        attaches: Arc<Attaches>,
        views: Arc<Views>,
        executor: Arc<Executor>,
    ) -> Self {
        Self {
            lanes: FoldCache::new(ledger.clone()),
            ledger,
            registry,
            attaches,
            views,
            executor,
        }
    }

    /// A durable lane's folded state.
    pub(super) async fn state(
        &self,
        stream: &StreamKey,
    ) -> Result<Arc<Folded<LaneState>>, LedgerError> {
        self.lanes.state(stream).await
    }

    /// Answers a run of commands on a protocol the attach did not select.
    pub(super) fn refuse_unselected(&self, attach: &Arc<Attach>, run: &[Command]) {
        let ans = run
            .iter()
            .map(|c| {
                answer(
                    &c.protocol,
                    c.seq,
                    Err(Rejection::new(
                        "unselected-protocol",
                        format!("{} is not selected on this attach", c.protocol),
                    )),
                    None,
                )
            })
            .collect();
        self.attaches.send(
            attach,
            Packet {
                ans,
                ..Packet::default()
            },
        );
    }

    /// Runs one command on an ephemeral lane; `None` when there is
    /// nothing to answer.
    pub(super) async fn run_ephemeral(
        &self,
        attach: &Arc<Attach>,
        command: Command,
    ) -> Result<Option<Answer>, FrameViolation> {
        {
            let mut state = lock(&attach.state);
            let lane = state.lanes.entry(command.protocol.clone()).or_default();
            if command.seq <= lane.watermark {
                return Ok(Some(
                    lane.answers.get(&command.seq).cloned().unwrap_or_else(|| {
                        answer(&command.protocol, command.seq, Err(expired()), None)
                    }),
                ));
            }
            if command.seq != lane.watermark + 1 {
                return Err(gap(&command.protocol, lane.watermark, command.seq));
            }
            lane.watermark = command.seq;
        }
        let contract = attach.contract(&command.protocol);
        let thread = attach.thread.clone();
        let outcome = {
            let _exec = thread.exec.lock().await;
            let documents = self.views.folded(&thread).await.map_err(server_violation)?;
            let statement = Statement {
                client: &attach.client,
                principal: attach.principal.clone(),
                protocol: &command.protocol,
                seq: command.seq,
                contract: contract.unwrap_or(Contract {
                    wire: attach.selection.wire,
                    version: attach.selection.wire,
                }),
                method: &command.method,
                params: &command.params,
            };
            let (outcome, _) =
                self.executor
                    .execute_once(&thread, &statement, Some(attach), &documents.state);
            outcome
        };
        let reply = answer(&command.protocol, command.seq, outcome, contract);
        let mut state = lock(&attach.state);
        let lane = state.lanes.entry(command.protocol.clone()).or_default();
        lane.answers.insert(command.seq, reply.clone());
        while lane.answers.len() > MAX_RETAINED_ANSWERS_PER_LANE {
            lane.answers.pop_first();
        }
        Ok(Some(reply))
    }

    /// Finishes the admitted-but-unanswered commands of `attach`'s
    /// durable lanes (a crash interrupted them), without an attach, under
    /// their recorded contracts; returns each durable lane's stream.
    pub(super) async fn recover(
        &self,
        thread: &Arc<Thread>,
        attach: &Attach,
    ) -> Result<Vec<(ProtocolName, StreamKey)>, HostError> {
        let mut durable = Vec::new();
        for p in &attach.selection.protocols {
            if p.record == Record::Durable {
                let stream = lane_stream(&thread.scope, &attach.client, &p.name)?;
                let lane_lock = thread.lane_lock(&attach.client, &p.name);
                let _lane = lane_lock.lock().await;
                let lane = self.lanes.state(&stream).await?;
                self.executor
                    .finish_admitted(thread, &attach.client, &p.name, &stream, &lane.state)
                    .await?;
                durable.push((p.name.clone(), stream));
            }
        }
        Ok(durable)
    }

    /// The retained answers of `lanes` above the client's `cursor`, as
    /// `attach` reads them.
    pub(super) async fn answers_above(
        &self,
        attach: &Attach,
        lanes: &[(ProtocolName, StreamKey)],
        cursor: &BTreeMap<ProtocolName, u64>,
    ) -> Result<Vec<Answer>, LedgerError> {
        let mut answers = Vec::new();
        for (name, stream) in lanes {
            let lane = self.lanes.state(stream).await?;
            let above = cursor.get(name).copied().unwrap_or(0);
            for (seq, retained) in lane.state.answers.range(above + 1..) {
                answers.push(answers::retained(
                    &self.registry,
                    &attach.selection,
                    name,
                    *seq,
                    retained,
                ));
            }
        }
        Ok(answers)
    }

    /// Each of `lanes`' watermark, by protocol name.
    pub(super) async fn watermarks(
        &self,
        lanes: &[(ProtocolName, StreamKey)],
    ) -> Result<BTreeMap<String, u64>, LedgerError> {
        let mut watermarks = BTreeMap::new();
        for (name, stream) in lanes {
            let lane = self.lanes.state(stream).await?;
            watermarks.insert(name.as_str().to_owned(), lane.state.watermark);
        }
        Ok(watermarks)
    }

    /// Admits, executes and answers a run of commands on a durable lane.
    pub(super) async fn run_durable(
        &self,
        attach: &Arc<Attach>,
        protocol: &ProtocolName,
        run: Vec<Command>,
    ) -> Result<(), FrameViolation> {
        let server = |e: HostError| server_violation(e);
        let thread = attach.thread.clone();
        let stream =
            lane_stream(&thread.scope, &attach.client, protocol).map_err(|e| server(e.into()))?;
        let lane_lock = thread.lane_lock(&attach.client, protocol);
        let lane_guard = lane_lock.lock().await;
        let contract = attach
            .contract(protocol)
            .ok_or_else(|| FrameViolation::invalid("unselected"))?;
        let mut violation = None;
        for attempt in 0.. {
            let lane = self
                .lanes
                .state(&stream)
                .await
                .map_err(|e| server(e.into()))?;
            // Whatever is admitted and unanswered (a crash left it, or
            // another instance's admission just won the append below) is
            // finished before anything after it, every time the lane is
            // folded: a re-sent seq then finds its answer, never
            // `answer-expired`, and the lane answers in seq order.
            if !lane.state.pending.is_empty() {
                if attempt + 1 >= MAX_ADMIT_ATTEMPTS {
                    return Err(server(HostError::Ledger(LedgerError::Unavailable {
                        reason: "the lane kept changing under other admissions".into(),
                    })));
                }
                self.executor
                    .finish_admitted(&thread, &attach.client, protocol, &stream, &lane.state)
                    .await
                    .map_err(server)?;
                continue;
            }
            let mut duplicates = Vec::new();
            let mut fresh = Vec::new();
            let mut next = lane.state.watermark + 1;
            for command in &run {
                if command.seq < next && fresh.is_empty() {
                    duplicates.push(match lane.state.answers.get(&command.seq) {
                        Some(retained) => answers::retained(
                            &self.registry,
                            &attach.selection,
                            protocol,
                            command.seq,
                            retained,
                        ),
                        None => answer(protocol, command.seq, Err(expired()), None),
                    });
                } else if command.seq == next {
                    fresh.push(command);
                    next += 1;
                } else {
                    violation = Some(gap(protocol, next - 1, command.seq));
                    break;
                }
            }
            if !duplicates.is_empty() {
                count_admissions("duplicate", duplicates.len());
                self.attaches.send(
                    attach,
                    Packet {
                        ans: duplicates,
                        ..Packet::default()
                    },
                );
            }
            if fresh.is_empty() {
                break;
            }
            let records = fresh
                .iter()
                .map(|c| admitted(attach, protocol, contract, c).to_record())
                .collect();
            let admitted = self
                .ledger
                .append(
                    &stream,
                    ExpectedPosition::Exactly(lane.position),
                    records,
                    Durability::Durable,
                )
                .await;
            match admitted {
                Ok(_) => count_admissions("admitted", fresh.len()),
                Err(LedgerError::Conflict { .. }) if attempt + 1 < MAX_ADMIT_ATTEMPTS => {
                    // Another host admitted on this lane: look again.
                    violation = None;
                    continue;
                }
                Err(error) => return Err(server(error.into())),
            }
            let watermark = next - 1;
            self.attaches.send(
                attach,
                Packet {
                    dur: vec![Dur {
                        protocol: protocol.clone(),
                        seq: watermark,
                    }],
                    ..Packet::default()
                },
            );
            let pending = fresh
                .iter()
                .map(|c| (c.seq, pending(attach, contract, c)))
                .collect();
            let answers = self
                .executor
                .execute_admitted(
                    &thread,
                    &attach.client,
                    protocol,
                    &stream,
                    pending,
                    Some(attach),
                )
                .await
                .map_err(server)?;
            let answers = answers
                .into_iter()
                .map(|(native, from)| {
                    answers::lowered(&self.registry, &attach.selection, native, from)
                })
                .collect();
            self.views.flush_attach(attach, answers, Vec::new()).await;
            break;
        }
        drop(lane_guard);
        match violation {
            Some(v) => {
                count_admissions("refused", 1);
                Err(v)
            }
            None => Ok(()),
        }
    }
}

/// The record admitting `command` on `attach`'s lane, under `contract`.
fn admitted(
    attach: &Attach,
    protocol: &ProtocolName,
    contract: Contract,
    command: &Command,
) -> CommandAdmitted {
    CommandAdmitted {
        client: attach.client.to_string(),
        protocol: protocol.to_string(),
        seq: command.seq,
        method: command.method.clone(),
        params: Value::Array(command.params.clone()).to_string(),
        wire_version: contract.wire.to_string(),
        protocol_version: contract.version.to_string(),
        attach: attach.id,
        attacher: attach.attacher.as_ref().map(|a| a.to_string()),
        principal: attach.principal.as_ref().map(ToString::to_string),
    }
}

/// `command`, just admitted, as the lane's fold will hold it until its
/// answer is recorded.
fn pending(attach: &Attach, contract: Contract, command: &Command) -> PendingCommand {
    PendingCommand {
        method: command.method.clone(),
        params: Json(Value::Array(command.params.clone())),
        wire_version: contract.wire.to_string(),
        protocol_version: contract.version.to_string(),
        principal: attach.principal.as_ref().map(ToString::to_string),
    }
}

/// Counts commands by what admission did with them.
fn count_admissions(outcome: &'static str, commands: usize) {
    metrics::counter!(STATEWIRE_ADMISSIONS, "outcome" => outcome).increment(commands as u64);
}
