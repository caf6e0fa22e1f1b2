//! Attaching: negotiation, lease context, the hello, and ending an
//! attach.
//!
//! Owns: an attach's life from negotiation to its `fin`. Must never: send
//! a packet before the hello, or let an attach read a thread of another
//! principal.

use super::views::ThreadDocuments;
use super::*;

/// What a transport passes to [`Host::attach`].
#[derive(Debug, Clone, Default)]
pub struct AttachRequest {
    pub thread: String,
    pub client: Option<String>,
    pub authorization: Option<String>,
    pub version: Option<String>,
    pub protocol: Option<String>,
    pub attacher: Option<String>,
    pub cursor: Option<String>,
    pub initial: Frame,
}

/// A successful attach: its packets (the hello first) and the durable
/// initial statements the transport submits after the hello is out.
pub struct AttachHandle {
    host: Host,
    pub attach: Arc<Attach>,
    inbox: Inbox,
    pub after_hello: Frame,
}

impl AttachHandle {
    /// The next packet, encoded; `None` once the attach has ended.
    pub async fn next(&mut self) -> Option<Outbound> {
        self.inbox.next(&self.attach.outbox).await
    }

    pub fn host(&self) -> &Host {
        &self.host
    }
}

impl Drop for AttachHandle {
    fn drop(&mut self) {
        self.host.detach(&self.attach);
    }
}

impl Host {
    /// Ends every open attach with `fin` (a shutdown): each transport sends
    /// it and closes.
    pub fn close_all(&self, fin: &Fin) {
        let attaches: Vec<Arc<Attach>> = lock(&self.inner.leases).values().cloned().collect();
        for attach in attaches {
            attach.outbox.close_with(fin.clone());
        }
    }

    /// Negotiates, installs lease context, runs ephemeral initial
    /// statements, retires the attacher's earlier attaches (2026-11-02)
    /// and queues the hello. Every failure is a `fin` and changes nothing.
    pub async fn attach(&self, request: AttachRequest) -> Result<AttachHandle, Fin> {
        let thread_id = ThreadId::new(request.thread.as_str())
            .map_err(|e| Fin::new(FinCode::InvalidNegotiation, e.to_string()))?;
        let principal = self.authenticate(&thread_id, request.authorization.as_deref())?;
        let invalid = |m: String| Fin::new(FinCode::InvalidNegotiation, m);
        let client = match &request.client {
            Some(text) => ClientId::new(text.as_str()).map_err(|e| invalid(e.to_string()))?,
            None => ClientId::mint(),
        };
        let support = &self.inner.support;
        let offer =
            negotiation::read_offer(request.version.as_deref(), request.protocol.as_deref())
                .map_err(|e| Fin::negotiation(&e, support))?;
        let selection =
            negotiation::negotiate(support, &offer).map_err(|e| Fin::negotiation(&e, support))?;
        let attacher = match &request.attacher {
            Some(text) if selection.wire >= WIRE_NAMED_ATTACHER => {
                Some(AttacherId::new(text.as_str()).map_err(|e| invalid(e.to_string()))?)
            }
            None if selection.wire >= WIRE_NAMED_ATTACHER => {
                return Err(invalid(format!(
                    "Statewire-Attacher is required from wire {WIRE_NAMED_ATTACHER}"
                )));
            }
            _ => None,
        };
        let cursor = match &request.cursor {
            Some(text) if selection.wire >= WIRE_RESULTS_CURSOR => {
                negotiation::read_cursor_field(text).map_err(|e| match e {
                    NegotiationError::Invalid(m) => invalid(m),
                    other => invalid(other.to_string()),
                })?
            }
            _ => BTreeMap::new(),
        };
        // Validate every context candidate before anything is installed.
        for entry in &request.initial.ctx {
            self.check_context(&selection, entry)
                .map_err(|v| fin_violation(&v))?;
        }
        if self.inner.lifecycle.is_draining() {
            return Err(Fin::new(
                FinCode::ShuttingDown,
                "the server is shutting down; attach again later",
            ));
        }
        let thread = self.thread(&ThreadScope::new(principal.clone(), thread_id))?;
        if lock(&thread.attaches).len() >= MAX_ATTACHES_PER_THREAD {
            return Err(Fin::new(
                FinCode::TooManyAttaches,
                "the thread has too many attaches",
            ));
        }
        let (outbox, inbox) = queue::outbox(self.inner.queue);
        let views = self.view_keys(&selection);
        let attach = Arc::new(Attach {
            id: self.inner.next_attach.fetch_add(1, Ordering::Relaxed),
            thread: thread.clone(),
            client,
            attacher,
            principal,
            selection,
            lease: random_hex(),
            views,
            outbox,
            state: Mutex::new(AttachState::default()),
            _open: (
                self.inner
                    .lifecycle
                    .track(crate::lifecycle::StreamKind::StatewireAttach),
                crate::telemetry::Open::new(metrics::gauge!(
                    crate::telemetry::STATEWIRE_ATTACHES_OPEN
                )),
            ),
        });
        for entry in &request.initial.ctx {
            self.install_context(&attach, entry);
        }
        // Durable lanes: finish commands a crash interrupted, before the
        // watermarks and answers the hello reports.
        let mut durable_lanes = Vec::new();
        for p in &attach.selection.protocols {
            if p.record == Record::Durable {
                let stream =
                    lane_stream(&thread.scope, &attach.client, &p.name).map_err(server_fin)?;
                self.recover_lane(&thread, &attach.client, &p.name, &stream)
                    .await
                    .map_err(server_fin)?;
                durable_lanes.push((p.name.clone(), stream));
            }
        }
        // Ephemeral-lane initial statements run before the snapshot.
        let (ephemeral_cmds, durable_cmds): (Vec<Command>, Vec<Command>) =
            request.initial.cmd.into_iter().partition(|c| {
                attach.selection.get(c.protocol.as_str()).map(|p| p.record)
                    == Some(Record::Ephemeral)
            });
        let mut hello_answers = Vec::new();
        for command in ephemeral_cmds {
            match self.run_ephemeral(&attach, command).await {
                Ok(Some(answer)) => hello_answers.push(answer),
                Ok(None) => {}
                Err(violation) => return Err(fin_violation(&violation)),
            }
        }
        // Retained answers above the client's cursor (2026-11-01 and later).
        if attach.selection.wire >= WIRE_RESULTS_CURSOR {
            for (name, stream) in &durable_lanes {
                let lane = self.inner.lanes.state(stream).await.map_err(server_fin)?;
                let above = cursor.get(name).copied().unwrap_or(0);
                for (seq, retained) in lane.state.answers.range(above + 1..) {
                    hello_answers.push(self.retained_for(&attach, name, *seq, retained));
                }
            }
        }
        // 2026-11-02: the attacher's earlier attaches end before the hello.
        if let Some(attacher) = &attach.attacher {
            let earlier: Vec<Arc<Attach>> = lock(&thread.attaches)
                .values()
                .filter(|a| a.client == attach.client && a.attacher.as_ref() == Some(attacher))
                .cloned()
                .collect();
            for old in earlier {
                self.end(
                    &old,
                    Fin::new(FinCode::Retired, "a newer attach of this attacher"),
                );
            }
        }
        // What the hello reports is read first, off every lock (reads may
        // wait for the store): the lanes' watermarks, and the thread's
        // documents with what this attach will read of them.
        let mut watermarks = BTreeMap::new();
        for (name, stream) in &durable_lanes {
            let lane = self.inner.lanes.state(stream).await.map_err(server_fin)?;
            watermarks.insert(name.as_str().to_owned(), lane.state.watermark);
        }
        let documents = self
            .thread_documents_with(&thread, Some(&attach))
            .await
            .map_err(server_fin)?;
        // Then the attach joins its thread, and the hello is built, under
        // its state lock: a flush that finds it waits for the hello.
        {
            let mut state = lock(&attach.state);
            self.join(&thread, &attach);
            let hello = self.hello(&attach, &mut state, watermarks, &documents, hello_answers);
            match hello {
                // The queue is new and empty: the hello always fits (see
                // `push`).
                Ok(hello) => {
                    attach.outbox.push(&hello);
                }
                Err(fin) => {
                    drop(state);
                    self.forget(&attach);
                    return Err(fin);
                }
            }
        }
        drop(documents);
        // A change that landed after the documents were read and before
        // the join was flushed to the thread without this attach: one
        // more flush sends it (nothing, if nothing landed).
        self.flush_attach(&attach, Vec::new(), Vec::new()).await;
        lock(&self.inner.leases).insert(attach.lease.clone(), attach.clone());
        Ok(AttachHandle {
            host: self.clone(),
            attach,
            inbox,
            after_hello: Frame {
                ctx: Vec::new(),
                cmd: durable_cmds,
            },
        })
    }

    /// The hello: the selection with each lane's watermark, the mounts of
    /// the whole view, and `answers`.
    fn hello(
        &self,
        attach: &Arc<Attach>,
        state: &mut AttachState,
        mut watermarks: BTreeMap<String, u64>,
        documents: &ThreadDocuments<'_>,
        answers: Vec<Answer>,
    ) -> Result<Packet, Fin> {
        for (name, lane) in &state.lanes {
            watermarks.insert(name.as_str().to_owned(), lane.watermark);
        }
        let view = self.view(attach, state, documents)?;
        let ops = state.table.update(&view);
        let syn = Syn::hello(&attach.selection, &attach.client, |name| {
            watermarks.get(name).copied().unwrap_or(0)
        });
        Ok(Packet {
            syn: Some(syn),
            ops,
            ans: answers,
            ..Packet::default()
        })
    }

    /// Ends an attach with `fin`, delivered after what is already queued.
    pub fn end(&self, attach: &Arc<Attach>, fin: Fin) {
        attach.outbox.close_with(fin);
        self.forget(attach);
    }

    /// Forgets an attach whose client left: its lease, its ephemeral lanes
    /// and documents.
    pub fn detach(&self, attach: &Arc<Attach>) {
        attach.outbox.close();
        self.forget(attach);
    }

    fn forget(&self, attach: &Arc<Attach>) {
        let thread = &attach.thread;
        let (removed, count) = {
            let mut attaches = lock(&thread.attaches);
            let removed = attaches.remove(&attach.id).is_some();
            (removed, attaches.len())
        };
        if removed {
            self.release_views(thread, &attach.views);
        }
        thread.attached.send_replace(count);
        lock(&self.inner.leases).remove(&attach.lease);
    }

    pub(super) fn check_context(
        &self,
        selection: &Selection,
        entry: &CtxEntry,
    ) -> Result<(), FrameViolation> {
        let violation = |m: String| FrameViolation {
            code: FinCode::InvalidContext,
            message: m,
        };
        if selection.get(entry.protocol.as_str()).is_none() {
            return Err(violation(format!(
                "ctx for unselected protocol {}",
                entry.protocol
            )));
        }
        if let Some(validate) = self.inner.validators.get(&entry.protocol) {
            validate(&entry.value, entry.meta.as_ref())
                .map_err(|m| violation(format!("{}: {m}", entry.protocol)))?;
        }
        Ok(())
    }

    pub(super) fn install_context(&self, attach: &Arc<Attach>, entry: &CtxEntry) {
        let previous = lock(&attach.state)
            .context
            .insert(
                entry.protocol.clone(),
                (entry.value.clone(), entry.meta.clone()),
            )
            .map(|(value, _)| value);
        if let Some(listeners) = self.inner.listeners.get(&entry.protocol) {
            let change = ContextChange {
                thread: attach.thread.scope.clone(),
                client: attach.client.clone(),
                attach: attach.id,
                protocol: entry.protocol.clone(),
                previous,
                value: entry.value.clone(),
                meta: entry.meta.clone(),
            };
            for listener in listeners {
                listener(&change);
            }
        }
    }

    pub(super) fn send(&self, attach: &Arc<Attach>, packet: Packet) {
        if packet.is_empty() {
            return;
        }
        match attach.outbox.push(&packet) {
            Pushed::Queued | Pushed::Closed => {}
            Pushed::Overflow => {
                tracing::warn!(
                    attach = attach.id,
                    "dropping an attach that reads too slowly"
                );
                let fin = Fin::new(
                    FinCode::SlowReader,
                    "this attach fell too far behind its packets; attach again",
                );
                self.end(attach, fin);
            }
        }
    }
}
