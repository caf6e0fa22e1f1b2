//! Views: the documents each attach should see, and flushing their
//! diffs. A flush reads the thread's documents once (the host's documents
//! fold and each derived protocol's snapshot) and diffs every attach's
//! table against the view it selects from them.
//!
//! Owns: reading a thread once per flush and each attach's diff. Must
//! never: read the store while an attach's lock is held, or send an
//! attach a document its selection does not include.

use super::*;

/// A derived protocol's snapshot, or why it could not be taken.
type Snapshot = Result<Arc<dyn SourceSnapshot>, String>;

/// What `snapshot` would read for the thread's attaches (each under its
/// lock for a moment) and for a view for nobody in particular.
fn wanted_by_attaches(
    thread: &Thread,
    joining: Option<&Arc<Attach>>,
    snapshot: &dyn SourceSnapshot,
) -> Vec<u64> {
    let nobody = BTreeMap::new();
    let mut wanted = snapshot.wanted(&AttachDocuments::new(&nobody));
    let mut attaches: Vec<Arc<Attach>> = lock(&thread.attaches).values().cloned().collect();
    attaches.extend(joining.cloned());
    for attach in attaches {
        let state = lock(&attach.state);
        wanted.extend(snapshot.wanted(&AttachDocuments::new(&state.ephemeral)));
    }
    wanted.sort_unstable();
    wanted.dedup();
    wanted
}

/// One flush's reading of a thread: the host's documents, and the
/// snapshots of derived protocols, each taken on first use.
pub(super) struct ThreadDocuments<'a> {
    pub(super) thread: &'a Thread,
    documents: Arc<crate::ledger::Folded<DocumentsState>>,
    /// Every derived protocol's snapshot, with what the thread's
    /// attaches will read of it already read.
    snapshots: BTreeMap<ProtocolName, Snapshot>,
    /// Compatibility views projected in this flush.
    pub(super) projections: Mutex<BTreeMap<ViewKey, Result<projection::Projected, String>>>,
}

impl ThreadDocuments<'_> {
    /// The derived protocol's snapshot taken for this flush.
    pub(super) fn snapshot(
        &self,
        protocol: &ProtocolName,
        _source: &Arc<dyn DocumentSource>,
    ) -> Snapshot {
        self.snapshots
            .get(protocol)
            .cloned()
            .unwrap_or_else(|| Err(format!("no snapshot of {protocol} was taken")))
    }

    pub(super) fn documents(&self) -> &DocumentsState {
        &self.documents.state
    }

    /// How far the host's documents are folded.
    pub(super) fn position(&self) -> u64 {
        self.documents.position
    }
}

impl Host {
    /// Reads `thread`'s documents for one flush: the host's documents and
    /// a snapshot of every derived protocol, each with what the thread's
    /// attaches (and a view for nobody in particular) will read of it.
    pub(super) async fn thread_documents<'a>(
        &'a self,
        thread: &'a Thread,
    ) -> Result<ThreadDocuments<'a>, HostError> {
        self.thread_documents_with(thread, None).await
    }

    /// [`Host::thread_documents`], reading also what `joining` (an attach
    /// about to join the thread) will read.
    pub(super) async fn thread_documents_with<'a>(
        &'a self,
        thread: &'a Thread,
        joining: Option<&Arc<Attach>>,
    ) -> Result<ThreadDocuments<'a>, HostError> {
        let documents = self.inner.documents.state(&thread.documents).await?;
        let mut snapshots = BTreeMap::new();
        for (name, info) in &self.inner.protocols {
            let Some(source) = &info.source else {
                continue;
            };
            let snapshot = source.snapshot(&thread.scope).await;
            if let Ok(snapshot) = &snapshot {
                let wanted = wanted_by_attaches(thread, joining, snapshot.as_ref());
                if !wanted.is_empty() {
                    snapshot.read_wanted(wanted).await;
                }
            }
            snapshots.insert(name.clone(), snapshot);
        }
        Ok(ThreadDocuments {
            thread,
            projections: Mutex::new(BTreeMap::new()),
            documents,
            snapshots,
        })
    }

    /// The documents `attach` should see now; an error is the `fin` that
    /// ends it (documents that cannot be read, a projection that failed).
    pub(super) fn view(
        &self,
        attach: &Attach,
        state: &AttachState,
        documents: &ThreadDocuments<'_>,
    ) -> Result<View, Fin> {
        let mut view = View::new();
        // An older contract's protocols read their projection, never the
        // native state.
        for key in &attach.views {
            let projected = self
                .projection(documents, key)
                .map_err(|error| Fin::new(FinCode::ProjectionFailed, error))?;
            for (identity, value) in projected.iter() {
                view.insert(identity.clone(), value.clone());
            }
        }
        let projected = |name: &ProtocolName| attach.views.iter().any(|k| k.members.contains(name));
        for p in &attach.selection.protocols {
            match p.record {
                Record::Durable if projected(&p.name) => {}
                Record::Durable => self
                    .durable_view(p, state, documents, &mut view)
                    .map_err(server_fin)?,
                Record::Ephemeral => {
                    for (id, value) in state
                        .ephemeral
                        .iter()
                        .filter(|(id, _)| id.protocol == p.name)
                    {
                        view.insert(id.clone(), Arc::new(value.clone()));
                    }
                }
            }
        }
        for id in state.included.iter().filter(|id| !projected(&id.protocol)) {
            if let Some(value) = documents
                .documents()
                .documents
                .get(&(id.protocol.to_string(), id.key.clone()))
            {
                view.insert(id.clone(), Arc::new(value.0.clone()));
            }
        }
        Ok(view)
    }

    /// A durable protocol's part of a view: its main document, and for a
    /// derived protocol the keyed documents its source picks.
    fn durable_view(
        &self,
        selected: &SelectedProtocol,
        state: &AttachState,
        documents: &ThreadDocuments<'_>,
        view: &mut View,
    ) -> Result<(), String> {
        let info = self.inner.protocols.get(&selected.name);
        if let Some(source) = info.and_then(|info| info.source.as_ref()) {
            let snapshot = documents.snapshot(&selected.name, source)?;
            view.insert(DocIdentity::main(selected.name.clone()), snapshot.main());
            let attach = AttachDocuments {
                ephemeral: &state.ephemeral,
            };
            for (key, value) in snapshot.keyed(&attach) {
                view.insert(DocIdentity::keyed(selected.name.clone(), key), value);
            }
            return Ok(());
        }
        let value = documents
            .documents()
            .documents
            .get(&(selected.name.to_string(), None))
            .map(|j| j.0.clone())
            .or_else(|| info.map(|info| info.initial_main.clone()));
        if let Some(value) = value {
            view.insert(DocIdentity::main(selected.name.clone()), Arc::new(value));
        }
        Ok(())
    }

    /// Sends `attach` its view diff, then `answers`, in one packet.
    pub(super) async fn flush_attach(
        &self,
        attach: &Arc<Attach>,
        answers: Vec<Answer>,
        dur: Vec<Dur>,
    ) {
        match self.thread_documents(&attach.thread).await {
            Ok(documents) => self.flush_with(attach, &documents, answers, dur),
            Err(error) => self.end(attach, server_fin(error)),
        }
    }

    pub(super) fn flush_with(
        &self,
        attach: &Arc<Attach>,
        documents: &ThreadDocuments<'_>,
        ans: Vec<Answer>,
        dur: Vec<Dur>,
    ) {
        let mut state = lock(&attach.state);
        let view = match self.view(attach, &state, documents) {
            Ok(view) => view,
            Err(fin) => {
                drop(state);
                self.end(attach, fin);
                return;
            }
        };
        let ops = state.table.update(&view);
        let packet = Packet {
            ops,
            ans,
            dur,
            ..Packet::default()
        };
        // Sent under the state lock so packets leave in table order.
        self.send(attach, packet);
    }

    /// Flushes every attach of the thread but `except` (which its caller
    /// flushes with its answers): after a document commit, or when a
    /// derived protocol's stream moved.
    pub(super) async fn flush_thread(&self, thread: &Arc<Thread>, except: Option<u64>) {
        let attaches: Vec<Arc<Attach>> = lock(&thread.attaches)
            .values()
            .filter(|a| Some(a.id) != except)
            .cloned()
            .collect();
        if attaches.is_empty() {
            return;
        }
        let documents = match self.thread_documents(thread).await {
            Ok(documents) => documents,
            Err(error) => {
                let fin = server_fin(error);
                for attach in attaches {
                    self.end(&attach, fin.clone());
                }
                return;
            }
        };
        for attach in attaches {
            self.flush_with(&attach, &documents, Vec::new(), Vec::new());
        }
    }
}
