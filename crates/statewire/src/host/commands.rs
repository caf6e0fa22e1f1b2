//! Statements: admission on durable and ephemeral lanes, execution,
//! durable document commits, answers and crash recovery.
//!
//! Owns: the lanes' admission order and the execution of each command.
//! Must never: dispatch before the admission is durable, or send an answer
//! before it is recorded.

use super::*;

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

impl Host {
    /// Handles one frame from `attach`. A violation is returned for the
    /// transport to end the attach with; statements before it stand.
    pub async fn submit(&self, attach: &Arc<Attach>, frame: Frame) -> Result<(), FrameViolation> {
        if attach.is_closed() {
            return Err(FrameViolation {
                code: FinCode::UnknownLease,
                message: "the attach has ended".into(),
            });
        }
        crate::statewire::packet::check_frame(&frame)?;
        for entry in &frame.ctx {
            self.check_context(&attach.selection, entry)?;
        }
        for entry in &frame.ctx {
            self.install_context(attach, entry);
        }
        // Runs of consecutive commands on one protocol are one batch.
        let mut commands = frame.cmd.into_iter().peekable();
        while let Some(first) = commands.next() {
            let mut run = vec![first];
            while let Some(next) = commands.next_if(|c| c.protocol == run[0].protocol) {
                run.push(next);
            }
            let protocol = run[0].protocol.clone();
            match attach.selection.get(protocol.as_str()).map(|p| p.record) {
                None => {
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
                    self.send(
                        attach,
                        Packet {
                            ans,
                            ..Packet::default()
                        },
                    );
                }
                Some(Record::Ephemeral) => {
                    for command in run {
                        if let Some(answer) = self.run_ephemeral(attach, command).await? {
                            self.flush_attach(attach, vec![answer], Vec::new()).await;
                        }
                    }
                }
                Some(Record::Durable) => self.run_durable(attach, &protocol, run).await?,
            }
        }
        Ok(())
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
            let documents = self
                .inner
                .documents
                .state(&thread.documents)
                .await
                .map_err(server_violation)?;
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
                self.execute_once(&thread, &statement, Some(attach), &documents.state);
            outcome
        };
        let reply = answer(&command.protocol, command.seq, outcome, contract);
        let mut state = lock(&attach.state);
        let lane = state.lanes.entry(command.protocol.clone()).or_default();
        lane.answers.insert(command.seq, reply.clone());
        while lane.answers.len() > crate::statewire::records::MAX_RETAINED_ANSWERS_PER_LANE {
            lane.answers.pop_first();
        }
        Ok(Some(reply))
    }

    pub(super) fn lane_lock(
        &self,
        thread: &Thread,
        client: &ClientId,
        protocol: &ProtocolName,
    ) -> LaneLock {
        let mut lanes = lock(&thread.lanes);
        if lanes.len() >= MAX_LANE_LOCKS_PER_THREAD {
            lanes.retain(|_, l| Arc::strong_count(l) > 1);
        }
        lanes
            .entry((client.clone(), protocol.clone()))
            .or_insert_with(|| Arc::new(tokio::sync::Mutex::new(())))
            .clone()
    }

    /// Finishes the lane's admitted-but-unanswered commands, without an
    /// attach, under their recorded contracts.
    pub(super) async fn recover_lane(
        &self,
        thread: &Arc<Thread>,
        client: &ClientId,
        protocol: &ProtocolName,
        stream: &StreamKey,
    ) -> Result<(), HostError> {
        let lane_lock = self.lane_lock(thread, client, protocol);
        let _lane = lane_lock.lock().await;
        self.finish_pending(thread, client, protocol, stream).await
    }

    /// Runs the lane's admitted-but-unanswered commands. Under the lane's
    /// lock, a pending command is one nobody in this host is running: a
    /// crash left it, or a ledger failure stopped its run; each is keyed
    /// (its document commit, or its async handler's key), so one that had
    /// taken effect answers what it did.
    pub(super) async fn finish_pending(
        &self,
        thread: &Arc<Thread>,
        client: &ClientId,
        protocol: &ProtocolName,
        stream: &StreamKey,
    ) -> Result<(), HostError> {
        let lane = self.inner.lanes.state(stream).await?;
        self.finish_admitted(thread, client, protocol, stream, &lane.state)
            .await
    }

    /// Runs the admitted-but-unanswered commands of `lane` (a folded
    /// state) in seq order; nothing when there are none. Their answers are
    /// retained: a re-send, or the hello above the client's cursor,
    /// delivers them in the receiving attach's contract.
    async fn finish_admitted(
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
        let lane_lock = self.lane_lock(&thread, &attach.client, protocol);
        let lane_guard = lane_lock.lock().await;
        let contract = attach
            .contract(protocol)
            .ok_or_else(|| FrameViolation::invalid("unselected"))?;
        let mut violation = None;
        for attempt in 0.. {
            let lane = self
                .inner
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
                self.finish_admitted(&thread, &attach.client, protocol, &stream, &lane.state)
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
                        Some(retained) => {
                            self.retained_for(attach, protocol, command.seq, retained)
                        }
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
                self.send(
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
            let records: Vec<_> = fresh
                .iter()
                .map(|c| {
                    CommandAdmitted {
                        client: attach.client.to_string(),
                        protocol: protocol.to_string(),
                        seq: c.seq,
                        method: c.method.clone(),
                        params: Value::Array(c.params.clone()).to_string(),
                        wire_version: contract.wire.to_string(),
                        protocol_version: contract.version.to_string(),
                        attach: attach.id,
                        attacher: attach.attacher.as_ref().map(|a| a.to_string()),
                        principal: attach.principal.as_ref().map(ToString::to_string),
                    }
                    .to_record()
                })
                .collect();
            let admitted = self
                .inner
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
            self.send(
                attach,
                Packet {
                    dur: vec![Dur {
                        protocol: protocol.clone(),
                        seq: watermark,
                    }],
                    ..Packet::default()
                },
            );
            let pending: Vec<(u64, PendingCommand)> = fresh
                .iter()
                .map(|c| {
                    (
                        c.seq,
                        PendingCommand {
                            method: c.method.clone(),
                            params: crate::statewire::records::Json(Value::Array(c.params.clone())),
                            wire_version: contract.wire.to_string(),
                            protocol_version: contract.version.to_string(),
                            principal: attach.principal.as_ref().map(ToString::to_string),
                        },
                    )
                })
                .collect();
            let answers = self
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
                .map(|(native, from)| self.lowered_for(attach, native, from))
                .collect();
            self.flush_attach(attach, answers, Vec::new()).await;
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
            let adapters = self.adapters_of(protocol);
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
            let native = self.native_of(protocol);
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
            self.inner
                .ledger
                .append(stream, ExpectedPosition::Any, records, Durability::Durable)
                .await?;
        }
        Ok(answers)
    }

    /// Executes one admitted durable command and commits its document
    /// changes with its answer; a command a crash left applied is not run
    /// again: its recorded answer is returned. An async handler keeps that
    /// promise itself (see [`Call::key`]).
    pub(super) async fn execute_durable(
        &self,
        thread: &Arc<Thread>,
        statement: &Statement<'_>,
        attach: Option<&Arc<Attach>>,
    ) -> Result<Outcome, HostError> {
        let _exec = thread.exec.lock().await;
        let key = (statement.protocol.clone(), statement.method.to_owned());
        if let Some(HandlerKind::Async(handler)) = self.inner.handlers.get(&key) {
            let call = Call {
                caller: self.caller(thread, statement),
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
            let documents = self.inner.documents.state(&thread.documents).await?;
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
                .inner
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
                    self.flush_thread(thread, attach.map(|a| a.id)).await;
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

    /// Who sent `statement`, as its handler sees them.
    fn caller(&self, thread: &Thread, statement: &Statement<'_>) -> Caller {
        Caller {
            client_id: statement.client.clone(),
            principal: statement.principal.clone(),
            is_connected: lock(&thread.attaches)
                .values()
                .any(|a| &a.client == statement.client),
        }
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
            caller: self.caller(thread, statement),
            thread: &thread.scope,
            protocol,
            contract: statement.contract,
            context,
            host: &self.inner,
            documents,
            staged: BTreeMap::new(),
            attach: txn,
        };
        let method = statement.method;
        let outcome = match self
            .inner
            .handlers
            .get(&(protocol.clone(), method.to_owned()))
        {
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
    pub async fn commit_documents(
        &self,
        thread: &ThreadScope,
        changes: Vec<(String, Option<Vec<String>>, Option<Value>)>,
    ) -> Result<(), HostError> {
        let thread = self
            .thread(thread)
            .map_err(|fin| HostError::Registration(fin.message))?;
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
        self.inner
            .ledger
            .append(
                &thread.documents,
                ExpectedPosition::Any,
                vec![record],
                Durability::Durable,
            )
            .await?;
        self.flush_thread(&thread, None).await;
        Ok(())
    }
}

/// Counts commands by what admission did with them.
fn count_admissions(outcome: &'static str, commands: usize) {
    metrics::counter!(crate::telemetry::STATEWIRE_ADMISSIONS, "outcome" => outcome)
        .increment(commands as u64);
}
