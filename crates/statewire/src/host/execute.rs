//! Execution: running admitted commands (each lifted from the contract it
//! was admitted under), committing a command's document changes with its
//! answer, recording answers on the lane, and finishing the commands a
//! crash or a failed run left admitted but unanswered.
//!
//! Owns: what a command does once admitted, and the documents commits.
//! Must never: run a command a crash left applied again (its recorded
//! answer stands), let a handler's changes be seen before its command
//! succeeds, or send an answer before it is recorded.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::ids::{ClientId, PrincipalId, ProtocolName};
use crate::packet::{Answer, Contract, Rejection};
use crate::records::{
    CommandAnsweredUnder, CommandCause, DocumentChange, DocumentsCommitted, DocumentsState,
    LaneState, PendingCommand,
};
use crate::version::Version;
use ledgerwire_ledger::{Durability, ExpectedPosition, Ledger, LedgerError, Payload, StreamKey};

use super::adapters;
use super::answers::{Outcome, answer, outcome_from, outcome_json};
use super::context::{AttachTxn, CommandContext, resolve_key};
use super::failure::HostError;
use super::registry::{HandlerKind, Registry, WIRE_MIN};
use super::source::{Call, Caller};
use super::sync::lock;
use super::thread::Attach;
use super::thread::Thread;
use super::views::Views;

/// Most executions of one command when a concurrent commit (another host
/// on the same ledger) moves the documents under it.
pub const MAX_COMMIT_ATTEMPTS: usize = 8;

/// A command as the host executes it: admitted on a durable lane, or
/// accepted on an ephemeral one.
pub(super) struct Statement<'a> {
    pub(super) client: &'a ClientId,
    pub(super) principal: Option<PrincipalId>,
    pub(super) protocol: &'a ProtocolName,
    pub(super) seq: u64,
    pub(super) contract: Contract,
    pub(super) method: &'a str,
    pub(super) params: &'a [Value],
}

/// Runs commands against the host's documents or an application's
/// handlers.
pub(super) struct Executor {
    ledger: Ledger,
    registry: Arc<Registry>,
    views: Arc<Views>,
}

impl Executor {
    pub(super) fn new(ledger: Ledger, registry: Arc<Registry>, views: Arc<Views>) -> Self {
        Self {
            ledger,
            registry,
            views,
        }
    }

    /// Runs the admitted-but-unanswered commands of `lane` (a folded
    /// state) in seq order; nothing when there are none. Their answers are
    /// retained: a re-send, or the hello above the client's cursor,
    /// delivers them in the receiving attach's contract.
    pub(super) async fn finish_admitted(
        &self,
        thread: &Arc<Thread>,
        client: &ClientId,
        protocol: &ProtocolName,
        stream: &StreamKey,
        lane: &LaneState,
    ) -> Result<(), HostError> {
        if lane.pending.is_empty() {
            return Ok(());
        }
        let pending: Vec<(u64, PendingCommand)> =
            lane.pending.iter().map(|(s, p)| (*s, p.clone())).collect();
        self.execute_admitted(thread, client, protocol, stream, pending, None)
            .await
            .map(drop)
    }

    /// Executes admitted commands in order (each lifted from its recorded
    /// contract), records their native answers on the lane (one durable
    /// append) and returns them with the version they are encoded in.
    pub(super) async fn execute_admitted(
        &self,
        thread: &Arc<Thread>,
        client: &ClientId,
        protocol: &ProtocolName,
        stream: &StreamKey,
        pending: Vec<(u64, PendingCommand)>,
        attach: Option<&Arc<Attach>>,
    ) -> Result<Vec<(Answer, Version)>, HostError> {
        let mut records = Vec::new();
        let mut answers = Vec::new();
        for (seq, command) in pending {
            let contract = Contract {
                wire: Version::parse(&command.wire_version).unwrap_or(WIRE_MIN),
                version: Version::parse(&command.protocol_version).unwrap_or(WIRE_MIN),
            };
            let params = match &command.params.0 {
                Value::Array(items) => items.clone(),
                other => vec![other.clone()],
            };
            // Lifted here, from the recorded contract, never at admission:
            // a command a crash left pending is converted after the restart
            // exactly as it would have been before.
            let adapters = self.registry.adapters_of(protocol);
            let outcome = match adapters::lift(
                protocol,
                adapters,
                contract.version,
                &command.method,
                &params,
            ) {
                Err(rejection) => Err(rejection),
                Ok((method, params)) => {
                    let statement = Statement {
                        client,
                        // A lane belongs to its thread's principal: the
                        // admitting attach authenticated as this one.
                        principal: thread.scope.principal().cloned(),
                        protocol,
                        seq,
                        contract,
                        method: &method,
                        params: &params,
                    };
                    self.execute_durable(thread, &statement, attach).await?
                }
            };
            let (ok, text) = outcome_json(&outcome);
            let native = self.registry.native_of(protocol);
            records.push(
                CommandAnsweredUnder {
                    seq,
                    ok,
                    answer: text,
                    native_version: native.to_string(),
                }
                .to_record(),
            );
            answers.push((answer(protocol, seq, outcome, Some(contract)), native));
        }
        if !records.is_empty() {
            self.ledger
                .append(stream, ExpectedPosition::Any, records, Durability::Durable)
                .await?;
        }
        Ok(answers)
    }

    /// Executes one admitted durable command and commits its document
    /// changes with its answer; a command a crash left applied is not run
    /// again: its recorded answer is returned. An async handler keeps that
    /// promise itself (see [`Call::key`]).
    async fn execute_durable(
        &self,
        thread: &Arc<Thread>,
        statement: &Statement<'_>,
        attach: Option<&Arc<Attach>>,
    ) -> Result<Outcome, HostError> {
        let _exec = thread.exec.lock().await;
        if let Some(HandlerKind::Async(handler)) =
            self.registry.handler(statement.protocol, statement.method)
        {
            let call = Call {
                caller: caller(thread, statement),
                thread: thread.scope.clone(),
                protocol: statement.protocol.clone(),
                seq: statement.seq,
                method: statement.method.to_owned(),
                params: statement.params.to_vec(),
                contract: statement.contract,
                recovering: attach.is_none(),
            };
            return Ok(handler(call).await);
        }
        let (client, protocol, seq) = (statement.client, statement.protocol, statement.seq);
        for _ in 0..MAX_COMMIT_ATTEMPTS {
            let documents = self.views.folded(thread).await?;
            if let Some(applied) =
                documents
                    .state
                    .applied_answer(client.as_str(), protocol.as_str(), seq)
            {
                return Ok(outcome_from(applied.ok, &applied.answer.0));
            }
            let (outcome, changes) = self.execute_once(thread, statement, attach, &documents.state);
            if changes.is_empty() {
                return Ok(outcome);
            }
            let (ok, text) = outcome_json(&outcome);
            let record = DocumentsCommitted {
                cause: Some(CommandCause {
                    client: client.to_string(),
                    protocol: protocol.to_string(),
                    seq,
                    ok,
                    answer: text,
                }),
                changes,
            }
            .to_record();
            match self
                .ledger
                .append(
                    &thread.documents,
                    ExpectedPosition::Exactly(documents.position),
                    vec![record],
                    Durability::Durable,
                )
                .await
            {
                Ok(_) => {
                    // The admitting attach gets these ops with the answer.
                    self.views.flush_thread(thread, attach.map(|a| a.id)).await;
                    return Ok(outcome);
                }
                Err(LedgerError::Conflict { .. }) => continue,
                Err(error) => return Err(error.into()),
            }
        }
        Ok(Err(Rejection::new(
            "busy",
            "the thread's documents kept changing",
        )))
    }

    /// Runs a synchronous handler once against `documents`; applies its
    /// attach changes on success and returns its outcome and durable
    /// changes.
    pub(super) fn execute_once(
        &self,
        thread: &Arc<Thread>,
        statement: &Statement<'_>,
        attach: Option<&Arc<Attach>>,
        documents: &DocumentsState,
    ) -> (Outcome, Vec<DocumentChange>) {
        let protocol = statement.protocol;
        let (context, txn) = match attach {
            Some(attach) if !attach.is_closed() => {
                let state = lock(&attach.state);
                (
                    state.context.get(protocol).map(|(v, _)| v.clone()),
                    Some(AttachTxn {
                        thread: thread.scope.id().clone(),
                        selection: attach.selection.clone(),
                        ephemeral: state.ephemeral.clone(),
                        included: state.included.clone(),
                    }),
                )
            }
            _ => (None, None),
        };
        let mut ctx = CommandContext {
            caller: caller(thread, statement),
            thread: &thread.scope,
            protocol,
            contract: statement.contract,
            context,
            protocols: &self.registry.protocols,
            documents,
            staged: BTreeMap::new(),
            attach: txn,
        };
        let method = statement.method;
        let outcome = match self.registry.handler(protocol, method) {
            Some(HandlerKind::Sync(handler)) => handler(&mut ctx, statement.params),
            // Registration keeps async handlers on durable lanes, which
            // `execute_durable` dispatches before reaching here.
            Some(HandlerKind::Async(_)) => Err(Rejection::new(
                "unknown-method",
                format!("{protocol}.{method} runs on its durable lane only"),
            )),
            None => Err(Rejection::new(
                "unknown-method",
                format!("{protocol} has no method {method}"),
            )),
        };
        if outcome.is_err() {
            return (outcome, Vec::new());
        }
        let changes: Vec<DocumentChange> = ctx
            .staged
            .into_iter()
            .map(|((protocol, key), value)| DocumentChange {
                protocol: protocol.to_string(),
                key,
                value: value.map(|v| v.to_string()),
            })
            .collect();
        if let (Some(attach), Some(txn)) = (attach, ctx.attach) {
            let mut state = lock(&attach.state);
            state.ephemeral = txn.ephemeral;
            state.included = txn.included;
        }
        (outcome, changes)
    }

    /// Changes durable documents outside any command (application start,
    /// background work) and flushes every attach of the thread.
    pub(super) async fn commit_documents(
        &self,
        thread: &Thread,
        changes: Vec<(String, Option<Vec<String>>, Option<Value>)>,
    ) -> Result<(), HostError> {
        let _exec = thread.exec.lock().await;
        let changes = changes
            .into_iter()
            .map(|(protocol, key, value)| DocumentChange {
                protocol,
                key: key.map(|k| resolve_key(thread.scope.id(), k)),
                value: value.map(|v| v.to_string()),
            })
            .collect();
        let record = DocumentsCommitted {
            cause: None,
            changes,
        }
        .to_record();
        self.ledger
            .append(
                &thread.documents,
                ExpectedPosition::Any,
                vec![record],
                Durability::Durable,
            )
            .await?;
        self.views.flush_thread(thread, None).await;
        Ok(())
    }
}

/// Who sent `statement`, as its handler sees them.
fn caller(thread: &Thread, statement: &Statement<'_>) -> Caller {
    Caller {
        client_id: statement.client.clone(),
        principal: statement.principal.clone(),
        is_connected: thread.is_connected(statement.client),
    }
}
