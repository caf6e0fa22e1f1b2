//! Lazy compatibility views: the state an attach on an older contract
//! reads, projected from the native state through its path of adapters.
//!
//! A view is one stage of one path: the documents of a group of protocols
//! (one protocol, or an explicit composition) after a prefix of the
//! adapter applications an attach's versions require. Attaches whose
//! paths agree share every view they have in common; a view lives while
//! an attach needs it or a view downstream of it does. Each flush projects
//! a view at most once, from one reading of the native state, and every
//! attach on it diffs its own table against the result.
//!
//! Owns: view keys (which adapters an attach's selection crosses), the
//! per-thread registry of live views with their counts, projection times
//! and latest projections, and projecting a group's documents through one
//! adapter (`documents` runs a view's chain of them once per flush).
//! Must never: hand an older attach the native state in place of a
//! projection that failed, or keep a view no attach needs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::ids::{ProtocolName, ThreadScope};
use crate::negotiation::{Record, Selection};
use crate::view::DocIdentity;

use super::adapters::{Adapter, ProjectedDocument};
use super::registry::Registry;
use super::sync::lock;

/// Longest projection a flush logs at `info`, in microseconds; faster ones
/// log at `debug`.
pub const SLOW_PROJECTION_US: u64 = 10_000;

/// One view: the group's selected protocols and the adapter applications
/// (protocol, index in its adapters) that produce it, in order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ViewKey {
    pub members: Vec<ProtocolName>,
    pub steps: Vec<(ProtocolName, usize)>,
}

impl ViewKey {
    /// The view this one is projected from (`None`: the native state).
    pub(super) fn upstream(&self) -> Option<ViewKey> {
        (self.steps.len() > 1).then(|| ViewKey {
            members: self.members.clone(),
            steps: self.steps[..self.steps.len() - 1].to_vec(),
        })
    }

    /// This view and every view upstream of it.
    fn chain(&self) -> impl Iterator<Item = ViewKey> + '_ {
        (1..=self.steps.len()).map(|n| ViewKey {
            members: self.members.clone(),
            steps: self.steps[..n].to_vec(),
        })
    }
}

/// What the host knows of one live view.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ViewStats {
    /// Attaches that read this view or one downstream of it.
    pub dependents: usize,
    /// Projections made since the view became live.
    pub projections: u64,
    /// Duration of the latest projection, in microseconds.
    pub last_projection_us: u64,
}

/// A group's projected documents, as views insert them: every attach on
/// the view shares these `Arc`s, so an unchanged document costs each of
/// them a pointer comparison.
pub(super) type Projected = Arc<Vec<(DocIdentity, Arc<Value>)>>;

pub(super) fn shared(documents: Vec<ProjectedDocument>) -> Projected {
    Arc::new(
        documents
            .into_iter()
            .map(|d| {
                let identity = DocIdentity {
                    protocol: d.protocol,
                    main: d.main,
                    key: d.key,
                };
                (identity, Arc::new(d.value))
            })
            .collect(),
    )
}

/// A projection as the next stage's input.
pub(super) fn owned(projected: &Projected) -> Vec<ProjectedDocument> {
    projected
        .iter()
        .map(|(identity, value)| ProjectedDocument {
            protocol: identity.protocol.clone(),
            key: identity.key.clone(),
            main: identity.main,
            value: Value::clone(value),
        })
        .collect()
}

/// Which native state a projection was made from: the host documents'
/// fold position and, for each derived member, its snapshot's main
/// document (a new snapshot of a changed stream is a new `Arc`; holding
/// it keeps the comparison sound).
#[derive(Clone)]
pub(super) struct Stamp {
    pub(super) documents: u64,
    pub(super) sources: Vec<Arc<Value>>,
}

impl PartialEq for Stamp {
    fn eq(&self, other: &Self) -> bool {
        self.documents == other.documents
            && self.sources.len() == other.sources.len()
            && self
                .sources
                .iter()
                .zip(&other.sources)
                .all(|(a, b)| Arc::ptr_eq(a, b))
    }
}

/// A live view: its statistics and its latest projection.
#[derive(Default)]
struct LiveView {
    stats: ViewStats,
    latest: Option<(Stamp, Projected)>,
}

/// One thread's live views, each with what depends on it.
#[derive(Default)]
pub(super) struct LiveViews {
    views: Mutex<BTreeMap<ViewKey, LiveView>>,
}

impl LiveViews {
    /// Counts a joining attach's views (and those upstream of them) live.
    pub(super) fn hold(&self, thread: &ThreadScope, keys: &[ViewKey]) {
        let mut views = lock(&self.views);
        for view in keys.iter().flat_map(ViewKey::chain) {
            let live = views.entry(view.clone()).or_default();
            if live.stats.dependents == 0 {
                tracing::info!(thread = ?thread, view = ?view, "compatibility view activated");
            }
            live.stats.dependents += 1;
        }
    }

    /// Releases a leaving attach's views; a view no one needs goes.
    pub(super) fn release(&self, thread: &ThreadScope, keys: &[ViewKey]) {
        let mut views = lock(&self.views);
        for view in keys.iter().flat_map(ViewKey::chain) {
            if let Some(live) = views.get_mut(&view) {
                live.stats.dependents = live.stats.dependents.saturating_sub(1);
                if live.stats.dependents == 0 {
                    views.remove(&view);
                    tracing::info!(thread = ?thread, view = ?view, "compatibility view released");
                }
            }
        }
    }

    /// Every live view and what the host knows of it.
    pub(super) fn stats(&self) -> BTreeMap<ViewKey, ViewStats> {
        lock(&self.views)
            .iter()
            .map(|(key, live)| (key.clone(), live.stats.clone()))
            .collect()
    }

    /// Counts a projection of `view` that took `took_us`.
    pub(super) fn projected(&self, view: &ViewKey, took_us: u64) {
        if let Some(live) = lock(&self.views).get_mut(view) {
            live.stats.projections += 1;
            live.stats.last_projection_us = took_us;
        }
    }

    /// The latest projection of `view` and what it was made from.
    pub(super) fn latest(&self, view: &ViewKey) -> Option<(Stamp, Projected)> {
        lock(&self.views)
            .get(view)
            .and_then(|live| live.latest.clone())
    }

    /// Keeps `projected` as the latest projection of a live `view`.
    pub(super) fn keep_latest(&self, view: &ViewKey, stamp: Stamp, projected: &Projected) {
        if let Some(live) = lock(&self.views).get_mut(view) {
            live.latest = Some((stamp, projected.clone()));
        }
    }
}

/// The views an attach with `selection` reads: one per group of its
/// durable protocols whose path crosses an adapter that converts state.
pub(super) fn view_keys(registry: &Registry, selection: &Selection) -> Vec<ViewKey> {
    let mut keys: Vec<ViewKey> = Vec::new();
    for selected in selection.parents() {
        let Some(info) = registry.info(&selected.name) else {
            continue;
        };
        if info.record != Record::Durable {
            continue;
        }
        let group: Vec<ProtocolName> = match &info.group {
            Some(group) => group.to_vec(),
            None => vec![selected.name.clone()],
        };
        let members: Vec<ProtocolName> = group
            .into_iter()
            .filter(|m| selection.get(m.as_str()).is_some())
            .collect();
        if keys.iter().any(|k| k.members == members) {
            continue;
        }
        let mut steps = Vec::new();
        for member in &members {
            let (Some(version), adapters) = (
                selection.get(member.as_str()).map(|p| p.version),
                registry.adapters_of(member),
            ) else {
                continue;
            };
            for (index, adapter) in adapters.iter().enumerate().rev() {
                if adapter.applies_to(version) && adapter.projects() {
                    steps.push((member.clone(), index));
                }
            }
        }
        if !steps.is_empty() {
            keys.push(ViewKey { members, steps });
        }
    }
    keys
}

/// One adapter's projection of a group's documents: `state_down` on its
/// protocol's main document, then `documents_down` on the documents of
/// every protocol it transforms.
pub(super) fn apply_adapter(
    protocol: &ProtocolName,
    adapter: &Adapter,
    mut documents: Vec<ProjectedDocument>,
) -> Result<Vec<ProjectedDocument>, String> {
    let fail = |why: String| format!("{protocol} {}→{}: {why}", adapter.older, adapter.newer);
    if let Some(state_down) = &adapter.state_down
        && let Some(main) = documents
            .iter_mut()
            .find(|d| d.main && &d.protocol == protocol)
    {
        main.value = state_down(&main.value).map_err(fail)?;
    }
    let Some(documents_down) = &adapter.documents_down else {
        return Ok(documents);
    };
    let transforms =
        |p: &ProtocolName| p == protocol || adapter.also_transforms.iter().any(|a| a == p.as_str());
    let (mine, others): (Vec<_>, Vec<_>) =
        documents.into_iter().partition(|d| transforms(&d.protocol));
    let converted = documents_down(mine).map_err(fail)?;
    if let Some(stray) = converted.iter().find(|d| !transforms(&d.protocol)) {
        return Err(fail(format!(
            "it yielded a document of {}, which it does not transform",
            stray.protocol
        )));
    }
    let mut mains = BTreeSet::new();
    for document in converted.iter().filter(|d| d.main) {
        if !mains.insert(&document.protocol) {
            return Err(fail(format!(
                "it yielded two main documents of {}",
                document.protocol
            )));
        }
    }
    let mut out = others;
    out.extend(converted);
    Ok(out)
}
