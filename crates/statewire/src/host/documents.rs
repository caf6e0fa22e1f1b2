//! One flush's reading of a thread: the host's documents fold, and a
//! snapshot of every derived protocol with what the thread's attaches
//! (and a view for nobody in particular) will read of it already read, so
//! views are then built from memory. Each compatibility view is projected
//! from this reading at most once per flush (and not at all when its
//! native state has not moved since its last projection).
//!
//! Owns: reading a thread's documents once per flush, and projecting its
//! compatibility views from that reading. Must never: read the store
//! while an attach's lock is held, read a thread twice for one flush, or
//! hand an older attach the native state in place of a projection that
//! failed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::Value;

use crate::ids::ProtocolName;
use crate::records::{DocumentsFold, DocumentsState};
use ledgerwire_ledger::{FoldCache, Folded};

use super::adapters::ProjectedDocument;
use super::failure::HostError;
use super::projection::{
    Projected, SLOW_PROJECTION_US, Stamp, ViewKey, apply_adapter, owned, shared,
};
use super::registry::Registry;
use super::source::{AttachDocuments, SourceSnapshot};
use super::sync::lock;
use super::thread::Attach;
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
        for (name, info) in registry.protocols.iter() {
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

    /// A group's native documents: each member's main document and its
    /// keyed documents (all of the thread's, or what a source offers an
    /// attach with no interests).
    fn native_documents(&self, members: &[ProtocolName]) -> Result<Vec<ProjectedDocument>, String> {
        let registry = self.registry;
        let mut out = Vec::new();
        for member in members {
            let info = registry.info(member);
            if registry.source_of(member).is_some() {
                let snapshot = self.snapshot(member)?;
                out.push(ProjectedDocument {
                    protocol: member.clone(),
                    key: None,
                    main: true,
                    value: Value::clone(&snapshot.main()),
                });
                let nobody = BTreeMap::new();
                let attach = AttachDocuments::new(&nobody);
                for (key, value) in snapshot.keyed(&attach) {
                    out.push(ProjectedDocument {
                        protocol: member.clone(),
                        key: Some(key),
                        main: false,
                        value: Value::clone(&value),
                    });
                }
                continue;
            }
            let state = self.documents();
            let main = state
                .documents
                .get(&(member.to_string(), None))
                .map(|json| json.0.clone())
                .or_else(|| info.map(|info| info.initial_main.clone()));
            if let Some(value) = main {
                out.push(ProjectedDocument {
                    protocol: member.clone(),
                    key: None,
                    main: true,
                    value,
                });
            }
            for ((protocol, key), value) in &state.documents {
                if protocol == member.as_str() && key.is_some() {
                    out.push(ProjectedDocument {
                        protocol: member.clone(),
                        key: key.clone(),
                        main: false,
                        value: value.0.clone(),
                    });
                }
            }
        }
        Ok(out)
    }

    /// Projects `view` from the view upstream of it (or the native state)
    /// through its last adapter, and records how long it took.
    fn project(
        &self,
        view: &ViewKey,
        upstream: Vec<ProjectedDocument>,
    ) -> Result<Vec<ProjectedDocument>, String> {
        let Some((protocol, index)) = view.steps.last() else {
            return Ok(upstream);
        };
        let Some(adapter) = self.registry.adapters_of(protocol).get(*index) else {
            return Err(format!("{protocol} has no adapter {index}"));
        };
        let thread = self.thread;
        let started = Instant::now();
        let projected = apply_adapter(protocol, adapter, upstream);
        let took_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        thread.views.projected(view, took_us);
        if took_us > SLOW_PROJECTION_US {
            tracing::info!(thread = ?thread.scope, ?view, took_us, "slow projection");
        } else {
            tracing::debug!(thread = ?thread.scope, ?view, took_us, "projection");
        }
        projected
    }

    /// `view`'s documents for this flush: projected once, from one reading
    /// of the native state, whoever asks.
    pub(super) fn projection(&self, view: &ViewKey) -> Result<Projected, String> {
        if let Some(done) = lock(&self.projections).get(view) {
            return done.clone();
        }
        // A live view whose native state has not moved since its last
        // projection (a new attach's hello, a flush for another protocol)
        // is not projected again.
        let stamp = self.stamp(&view.members)?;
        let views = &self.thread.views;
        if let Some((made_from, projected)) = views.latest(view)
            && made_from == stamp
        {
            lock(&self.projections).insert(view.clone(), Ok(projected.clone()));
            return Ok(projected);
        }
        let upstream = match view.upstream() {
            Some(upstream) => owned(&self.projection(&upstream)?),
            None => self.native_documents(&view.members)?,
        };
        let result = self.project(view, upstream).map(shared);
        if let Ok(projected) = &result {
            views.keep_latest(view, stamp, projected);
        }
        lock(&self.projections).insert(view.clone(), result.clone());
        result
    }

    /// The native state a group's projection reads, as a comparable stamp.
    fn stamp(&self, members: &[ProtocolName]) -> Result<Stamp, String> {
        let mut sources = Vec::new();
        for member in members {
            if self.registry.source_of(member).is_some() {
                sources.push(self.snapshot(member)?.main());
            }
        }
        Ok(Stamp {
            documents: self.position(),
            sources,
        })
    }
}
