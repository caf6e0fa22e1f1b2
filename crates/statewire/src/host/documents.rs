//! One flush's reading of a thread: the host's documents fold, and a
//! snapshot of every derived protocol with what the thread's attaches
//! (and a view for nobody in particular) will read of it already read, so
//! views are then built from memory. Projections made in the flush are
//! kept here, so each view is projected at most once per flush.
//!
//! Owns: reading a thread's documents once per flush. Must never: read
//! the store while an attach's lock is held, or read a thread twice for
//! one flush.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::ledger::{FoldCache, Folded};
use crate::statewire::ids::ProtocolName;
use crate::statewire::records::{DocumentsFold, DocumentsState};

use super::attach::Attach;
use super::failure::HostError;
use super::lock;
use super::projection::{Projected, ViewKey};
use super::registry::Registry;
use super::source::{AttachDocuments, SourceSnapshot};
use super::thread::Thread;

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
    let mut attaches = thread.attaches();
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
/// snapshots of derived protocols.
pub(super) struct ThreadDocuments<'a> {
    registry: &'a Registry,
    thread: &'a Thread,
    documents: Arc<Folded<DocumentsState>>,
    /// Every derived protocol's snapshot, with what the thread's
    /// attaches will read of it already read.
    snapshots: BTreeMap<ProtocolName, Snapshot>,
    /// Compatibility views projected in this flush.
    projections: Mutex<BTreeMap<ViewKey, Result<Projected, String>>>,
}

impl<'a> ThreadDocuments<'a> {
    /// Reads `thread`'s documents for one flush, including what `joining`
    /// (an attach about to join the thread) will read.
    pub(super) async fn read(
        registry: &'a Registry,
        fold: &FoldCache<DocumentsFold>,
        thread: &'a Thread,
        joining: Option<&Arc<Attach>>,
    ) -> Result<Self, HostError> {
        let documents = fold.state(&thread.documents).await?;
        let mut snapshots = BTreeMap::new();
        for (name, info) in registry.protocols() {
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
        Ok(Self {
            registry,
            thread,
            projections: Mutex::new(BTreeMap::new()),
            documents,
            snapshots,
        })
    }
}

impl ThreadDocuments<'_> {
    pub(super) fn registry(&self) -> &Registry {
        self.registry
    }

    pub(super) fn thread(&self) -> &Thread {
        self.thread
    }

    /// The derived protocol's snapshot taken for this flush.
    pub(super) fn snapshot(&self, protocol: &ProtocolName) -> Snapshot {
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

    /// The views projected in this flush so far.
    pub(super) fn projections(&self) -> &Mutex<BTreeMap<ViewKey, Result<Projected, String>>> {
        &self.projections
    }
}
