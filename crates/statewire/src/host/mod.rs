//! The Statewire host: the Rust API applications register protocols and
//! command handlers with, and the engine behind both transports. [`Host`]
//! is a composition: each part below owns one thing, and the host routes
//! a transport's calls to them.
//!
//! - `registry`, `protocols`: the validated registrations (pure);
//!   `builder` makes them.
//! - `request`: an attach request's fields, validated.
//! - `thread`: each thread's live part (its attaches among it) and the
//!   table of threads.
//! - `attaches`, `queue`: the lease table, attaches' queues and ends.
//! - `lanes`: admission on durable and ephemeral lanes.
//! - `execute`: running admitted commands, document commits, recovery.
//! - `context`: what a handler sees of its command.
//! - `documents`, `views`, `projection`: reading a thread once per flush,
//!   each attach's view and diff, compatibility views.
//! - `follow`: tasks that flush a thread when a stream it reads grows.
//! - `adapters`, `answers`: converting between contracts (pure).
//! - `source`: the extension points for derived protocols.
//! - `failure`: the host's errors and their `fin`s; `sync`: its locks.
//!
//! Memory holds caches of the lane and document folds, plus the live
//! attaches, which are ephemeral by nature.
//! Owns: the host's public API and the order of an attach's start and a
//! frame's statements. Must never: dispatch a command before its
//! admission is on disk, dispatch an admitted command twice in one host,
//! send an answer before it is recorded, or disclose supported ranges
//! before authentication.

mod adapters;
mod answers;
mod attaches;
mod builder;
mod context;
mod documents;
mod execute;
mod failure;
mod follow;
mod lanes;
mod projection;
mod protocols;
mod queue;
mod registry;
mod request;
mod source;
mod sync;
mod thread;
mod views;

pub use adapters::{
    Adapter, CommandInfo, CommandUp, CommandsDown, DocumentsDown, ErrorDown, ProjectedDocument,
    ResultDown, StateDown,
};
pub use attaches::MAX_ATTACHES_PER_THREAD;
pub use builder::{HostBuilder, ProtocolDef};
pub use context::{
    AttachTxn, CommandContext, MAX_CHANGES_PER_COMMAND, MAX_DOCUMENT_BYTES,
    MAX_EPHEMERAL_DOCUMENTS, MAX_INCLUDED_DOCUMENTS, NoAttach, resolve_key,
};
pub use execute::MAX_COMMIT_ATTEMPTS;
pub use failure::{HostError, store_fin};
pub use follow::MAX_RECORDS_PER_FLUSH;
pub use lanes::MAX_ADMIT_ATTEMPTS;
pub use projection::{SLOW_PROJECTION_US, ViewKey, ViewStats};
pub use queue::{MAX_QUEUED_BYTES, MAX_QUEUED_PACKETS, Outbound, QueueLimits};
pub use registry::{
    Authenticator, ContextChange, ContextListener, ContextValidator, Handler, ProtocolCommands,
    WIRE_MAX, WIRE_MIN, WIRE_NAMED_ATTACHER, WIRE_RESULTS_CURSOR,
};
pub use request::AttachRequest;
pub use source::{AsyncHandler, AttachDocuments, Call, Caller, DocumentSource, SourceSnapshot};
pub use thread::{Attach, MAX_IDLE_THREADS, MAX_LANE_LOCKS_PER_THREAD};

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use crate::ids::{ClientId, PrincipalId, ProtocolName, ThreadId, ThreadScope};
use crate::negotiation::{Record, Selection, Support};
use crate::packet::{Command, CtxEntry, Fin, FinCode, Frame, FrameViolation, check_frame};
use crate::records::{LaneState, lane_stream};
use crate::relay::Relay;
use ledgerwire_foundations::lifecycle::Lifecycle;
use ledgerwire_ledger::Ledger;

use attaches::Attaches;
use execute::Executor;
use failure::{fin_violation, server_fin};
use follow::Followers;
use lanes::Lanes;
use projection::view_keys;
use queue::Inbox;
use registry::Registry;
use request::Negotiated;
use sync::lock;
use thread::Threads;
use views::Views;

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

/// The host. Cheap to clone.
#[derive(Clone)]
pub struct Host {
    inner: Arc<Inner>,
}

/// The parts, each owning one thing (see the module's list).
struct Inner {
    ledger: Ledger,
    registry: Arc<Registry>,
    threads: Threads,
    attaches: Arc<Attaches>,
    views: Arc<Views>,
    executor: Arc<Executor>,
    lanes: Lanes,
    followers: Followers,
    /// How `/frames` reaches another instance's attaches (set once the
    /// server knows its address; never on a store of one process).
    relay: OnceLock<Relay>,
}

impl Host {
    pub fn builder() -> HostBuilder {
        HostBuilder::default()
    }

    /// The host over `registry`'s registrations (see [`HostBuilder`]).
    fn new(ledger: Ledger, registry: Registry, queue: QueueLimits, lifecycle: Lifecycle) -> Self {
        let registry = Arc::new(registry);
        let attaches = Arc::new(Attaches::new(queue, lifecycle));
        let views = Arc::new(Views::new(registry.clone(), &ledger, attaches.clone()));
        let executor = Arc::new(Executor::new(
            ledger.clone(),
            registry.clone(),
            views.clone(),
        ));
        let lanes = Lanes::new(
            ledger.clone(),
            registry.clone(),
            attaches.clone(),
            views.clone(),
            executor.clone(),
        );
        let followers = Followers::new(
            ledger.clone(),
            registry.clone(),
            views.clone(),
            attaches.clone(),
        );
        Host {
            inner: Arc::new(Inner {
                ledger,
                registry,
                threads: Threads::default(),
                attaches,
                views,
                executor,
                lanes,
                followers,
                relay: OnceLock::new(),
            }),
        }
    }

    /// What this host serves (wire range and protocols).
    pub fn support(&self) -> &Support {
        self.inner.registry.support()
    }

    pub fn ledger(&self) -> &Ledger {
        &self.inner.ledger
    }

    /// Runs the authenticator (every transport calls this first, before
    /// it reads anything else of the request). A refusal discloses
    /// nothing but the authenticator's sentence.
    pub fn authenticate(
        &self,
        thread: &ThreadId,
        authorization: Option<&str>,
    ) -> Result<Option<PrincipalId>, Fin> {
        self.inner.registry.authenticate(thread, authorization)
    }

    /// The live attach a lease names.
    pub fn lease(&self, lease: &str) -> Option<Arc<Attach>> {
        self.inner.attaches.lease(lease)
    }

    /// Lets `/frames` reach this host's attaches from other instances,
    /// and relay there (see [`crate::relay`]); set once.
    pub fn serve_relay(&self, relay: Relay) {
        let _ = self.inner.relay.set(relay);
    }

    /// The relay, on a store several instances share.
    pub fn relay(&self) -> Option<&Relay> {
        self.inner.relay.get()
    }

    /// A durable lane's folded state (tests, tools).
    pub async fn lane_state(
        &self,
        thread: &ThreadScope,
        client: &ClientId,
        protocol: &ProtocolName,
    ) -> Result<LaneState, HostError> {
        let stream = lane_stream(thread, client, protocol)?;
        Ok(self.inner.lanes.state(&stream).await?.state.clone())
    }

    /// Authenticates and negotiates `request` without attaching: the
    /// selection an attach with these fields would get.
    pub fn select(&self, request: &AttachRequest) -> Result<Selection, Fin> {
        request.select(&self.inner.registry)
    }

    /// The commands an attach with `selection` may send, per selected
    /// protocol, as its contract names them (discovery).
    pub fn commands(&self, selection: &Selection) -> Vec<ProtocolCommands> {
        self.inner.registry.commands(selection)
    }

    /// Number of live attaches on a thread.
    pub fn attach_count(&self, thread: &ThreadScope) -> usize {
        self.inner.threads.attach_count(thread)
    }

    /// The live views of a thread (tests, operators).
    pub fn views(&self, thread: &ThreadScope) -> BTreeMap<ViewKey, ViewStats> {
        self.inner.threads.views(thread)
    }

    /// Ends every open attach with `fin` (a shutdown): each transport sends
    /// it and closes.
    pub fn close_all(&self, fin: &Fin) {
        self.inner.attaches.close_all(fin);
    }

    /// Ends an attach with `fin`, delivered after what is already queued.
    pub fn end(&self, attach: &Arc<Attach>, fin: Fin) {
        self.inner.attaches.end(attach, fin);
    }

    /// Forgets an attach whose client left: its lease, its ephemeral lanes
    /// and documents.
    pub fn detach(&self, attach: &Arc<Attach>) {
        self.inner.attaches.detach(attach);
    }

    /// Changes durable documents outside any command (application start,
    /// background work) and flushes every attach of the thread.
    pub async fn commit_documents(
        &self,
        thread: &ThreadScope,
        changes: Vec<(String, Option<Vec<String>>, Option<Value>)>,
    ) -> Result<(), HostError> {
        let thread = self
            .inner
            .threads
            .open(thread)
            .map_err(|error| HostError::Registration(server_fin(error).message))?;
        self.inner.executor.commit_documents(&thread, changes).await
    }

    /// Negotiates, installs lease context, runs ephemeral initial
    /// statements, retires the attacher's earlier attaches (2026-11-02)
    /// and queues the hello. Every failure is a `fin` and changes nothing.
    pub async fn attach(&self, request: AttachRequest) -> Result<AttachHandle, Fin> {
        let Inner {
            registry,
            threads,
            attaches,
            views,
            lanes,
            followers,
            ..
        } = &*self.inner;
        let Negotiated {
            thread,
            principal,
            client,
            selection,
            attacher,
            cursor,
        } = request.negotiate(registry)?;
        // Validate every context candidate before anything is installed.
        for entry in &request.initial.ctx {
            registry
                .check_context(&selection, entry)
                .map_err(|v| fin_violation(&v))?;
        }
        attaches.refuse_if_draining()?;
        let thread = threads
            .open(&ThreadScope::new(principal.clone(), thread))
            .map_err(server_fin)?;
        let views_read = view_keys(registry, &selection);
        let (attach, inbox) =
            attaches.open(&thread, client, attacher, principal, selection, views_read)?;
        for entry in &request.initial.ctx {
            self.install_context(&attach, entry);
        }
        // Durable lanes: finish commands a crash interrupted, before the
        // watermarks and answers the hello reports.
        let durable_lanes = lanes.recover(&thread, &attach).await.map_err(server_fin)?;
        // Ephemeral-lane initial statements run before the snapshot.
        let (ephemeral_cmds, durable_cmds): (Vec<Command>, Vec<Command>) =
            request.initial.cmd.into_iter().partition(|c| {
                attach.selection.get(c.protocol.as_str()).map(|p| p.record)
                    == Some(Record::Ephemeral)
            });
        let mut hello_answers = Vec::new();
        for command in ephemeral_cmds {
            match lanes.run_ephemeral(&attach, command).await {
                Ok(Some(answer)) => hello_answers.push(answer),
                Ok(None) => {}
                Err(violation) => return Err(fin_violation(&violation)),
            }
        }
        // Retained answers above the client's cursor (2026-11-01 and later).
        if attach.selection.wire >= WIRE_RESULTS_CURSOR {
            let above = lanes
                .answers_above(&attach, &durable_lanes, &cursor)
                .await
                .map_err(server_fin)?;
            hello_answers.extend(above);
        }
        // 2026-11-02: the attacher's earlier attaches end before the hello.
        attaches.retire_earlier(&attach);
        // What the hello reports is read first, off every lock (reads may
        // wait for the store): the lanes' watermarks, and the thread's
        // documents with what this attach will read of them.
        let watermarks = lanes.watermarks(&durable_lanes).await.map_err(server_fin)?;
        let documents = views
            .read(&thread, Some(&attach))
            .await
            .map_err(server_fin)?;
        // Then the attach joins its thread, and the hello is built, under
        // its state lock: a flush that finds it waits for the hello.
        {
            let mut state = lock(&attach.state);
            followers.join(&thread, &attach);
            let hello = views.hello(&attach, &mut state, watermarks, &documents, hello_answers);
            match hello {
                // The queue is new and empty: the hello always fits (see
                // `push`).
                Ok(hello) => {
                    attach.outbox.push(&hello);
                }
                Err(fin) => {
                    drop(state);
                    attaches.forget(&attach);
                    return Err(fin);
                }
            }
        }
        drop(documents);
        // A change that landed after the documents were read and before
        // the join was flushed to the thread without this attach: one
        // more flush sends it (nothing, if nothing landed).
        views.flush_attach(&attach, Vec::new(), Vec::new()).await;
        attaches.register(&attach);
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

    /// Handles one frame from `attach`. A violation is returned for the
    /// transport to end the attach with; statements before it stand.
    pub async fn submit(&self, attach: &Arc<Attach>, frame: Frame) -> Result<(), FrameViolation> {
        if attach.is_closed() {
            return Err(FrameViolation {
                code: FinCode::UnknownLease,
                message: "the attach has ended".into(),
            });
        }
        check_frame(&frame)?;
        for entry in &frame.ctx {
            self.inner
                .registry
                .check_context(&attach.selection, entry)?;
        }
        for entry in &frame.ctx {
            self.install_context(attach, entry);
        }
        let lanes = &self.inner.lanes;
        // Runs of consecutive commands on one protocol are one batch.
        let mut commands = frame.cmd.into_iter().peekable();
        while let Some(first) = commands.next() {
            let mut run = vec![first];
            while let Some(next) = commands.next_if(|c| c.protocol == run[0].protocol) {
                run.push(next);
            }
            let protocol = run[0].protocol.clone();
            match attach.selection.get(protocol.as_str()).map(|p| p.record) {
                None => lanes.refuse_unselected(attach, &run),
                Some(Record::Ephemeral) => {
                    for command in run {
                        if let Some(answer) = lanes.run_ephemeral(attach, command).await? {
                            self.inner
                                .views
                                .flush_attach(attach, vec![answer], Vec::new())
                                .await;
                        }
                    }
                }
                Some(Record::Durable) => lanes.run_durable(attach, &protocol, run).await?,
            }
        }
        Ok(())
    }

    /// Replaces `attach`'s context for the entry's protocol and tells the
    /// protocol's listeners.
    fn install_context(&self, attach: &Arc<Attach>, entry: &CtxEntry) {
        let previous = lock(&attach.state)
            .context
            .insert(
                entry.protocol.clone(),
                (entry.value.clone(), entry.meta.clone()),
            )
            .map(|(value, _)| value);
        let listeners = self.inner.registry.listeners(&entry.protocol);
        if listeners.is_empty() {
            return;
        }
        let change = ContextChange {
            thread: attach.scope().clone(),
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
