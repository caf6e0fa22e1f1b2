//! Views: the documents each attach should see, and flushing their
//! diffs. A flush reads the thread's documents once (see `documents`) and
//! diffs every attach's table against the view it selects from them: its
//! projections on an older contract, its durable protocols' documents,
//! its ephemeral documents and the keyed documents it included.
//!
//! Owns: the host's documents fold, each attach's view, the hello's
//! documents, and flushing. Must never: read the store while an attach's
//! lock is held, or send an attach a document its selection does not
//! include.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::ids::ProtocolName;
use crate::negotiation::{Record, SelectedProtocol};
use crate::packet::{Answer, Dur, Fin, FinCode, Packet, Syn};
use crate::records::{DocumentsFold, DocumentsState};
use crate::view::{DocIdentity, View};
use ledgerwire_ledger::{FoldCache, Folded, Ledger, LedgerError};

use super::attaches::Attaches;
use super::documents::ThreadDocuments;
use super::failure::{HostError, server_fin};
use super::registry::Registry;
use super::source::AttachDocuments;
use super::sync::lock;
use super::thread::Thread;
use super::thread::{Attach, AttachState};

/// The host's documents and what each attach sees of them.
pub(super) struct Views {
    registry: Arc<Registry>,
    documents: FoldCache<DocumentsFold>,
    attaches: Arc<Attaches>,
}

impl Views {
    pub(super) fn new(registry: Arc<Registry>, ledger: &Ledger, attaches: Arc<Attaches>) -> Self {
        Self {
            registry,
            documents: FoldCache::new(ledger.clone()),
            attaches,
        }
    }

    /// The thread's documents as folded now (what a command runs against).
    pub(super) async fn folded(
        &self,
        thread: &Thread,
    ) -> Result<Arc<Folded<DocumentsState>>, LedgerError> {
        self.documents.state(&thread.documents).await
    }

    /// Reads `thread`'s documents for one flush, including what `joining`
    /// (an attach about to join the thread) will read.
    pub(super) async fn read<'a>(
        &'a self,
        thread: &'a Thread,
        joining: Option<&Arc<Attach>>,
    ) -> Result<ThreadDocuments<'a>, HostError> {
        ThreadDocuments::read(&self.registry, &self.documents, thread, joining).await
    }

    /// The documents `attach` should see now; an error is the `fin` that
    /// ends it (documents that cannot be read, a projection that failed).
    fn view(
        &self,
        attach: &Attach,
        state: &AttachState,
        documents: &ThreadDocuments<'_>,
    ) -> Result<View, Fin> {
        let mut view = View::new();
        // An older contract's protocols read their projection, never the
        // native state.
        for key in &attach.views {
            let projected = documents
                .projection(key)
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
        let info = self.registry.info(&selected.name);
        if info.is_some_and(|info| info.source.is_some()) {
            let snapshot = documents.snapshot(&selected.name)?;
            view.insert(DocIdentity::main(selected.name.clone()), snapshot.main());
            let attach = AttachDocuments::new(&state.ephemeral);
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

    /// The hello: the selection with each lane's watermark, the mounts of
    /// the whole view, and `answers`.
    pub(super) fn hello(
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

    /// Sends `attach` its view diff, then `answers`, in one packet.
    pub(super) async fn flush_attach(
        &self,
        attach: &Arc<Attach>,
        answers: Vec<Answer>,
        dur: Vec<Dur>,
    ) {
        match self.read(&attach.thread, None).await {
            Ok(documents) => self.flush_with(attach, &documents, answers, dur),
            Err(error) => self.attaches.end(attach, server_fin(error)),
        }
    }

    fn flush_with(
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
                self.attaches.end(attach, fin);
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
        self.attaches.send(attach, packet);
    }

    /// Flushes every attach of the thread but `except` (which its caller
    /// flushes with its answers): after a document commit, or when a
    /// derived protocol's stream moved.
    pub(super) async fn flush_thread(&self, thread: &Thread, except: Option<u64>) {
        let attaches: Vec<Arc<Attach>> = thread
            .attaches()
            .into_iter()
            .filter(|a| Some(a.id) != except)
            .collect();
        if attaches.is_empty() {
            return;
        }
        let documents = match self.read(thread, None).await {
            Ok(documents) => documents,
            Err(error) => {
                let fin = server_fin(error);
                for attach in attaches {
                    self.attaches.end(&attach, fin.clone());
                }
                return;
            }
        };
        for attach in attaches {
            self.flush_with(&attach, &documents, Vec::new(), Vec::new());
        }
    }
}
