//! Threads: each thread's live part (its attaches, the lock that
//! serialises its commands, its durable lanes' locks, its followers and
//! its live compatibility views) and the table that keeps them while
//! someone holds them. An attach is its thread's: its selection, lease,
//! queue and state (the document table, lease context, ephemeral
//! documents and lanes, included keys).
//!
//! Owns: the thread table and what a thread and its attaches hold in
//! memory. Must never: hold a state that is not a cache of a fold or a
//! live connection, or keep more than [`MAX_IDLE_THREADS`] threads
//! nobody holds.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::ids::{AttacherId, ClientId, PrincipalId, ProtocolName, ThreadId, ThreadScope};
use crate::negotiation::Selection;
use crate::packet::{Answer, Contract};
use crate::records::documents_stream;
use crate::view::{DocIdentity, DocTable};
use ledgerwire_foundations::lifecycle::Tracked;
use ledgerwire_foundations::telemetry::Open;
use ledgerwire_ledger::{LedgerError, StreamKey};

use super::projection::{LiveViews, ViewKey, ViewStats};
use super::queue::Outbox;
use super::sync::lock;

/// Threads kept in memory before those nobody holds are forgotten.
pub const MAX_IDLE_THREADS: usize = 10_000;
/// Lane locks kept per thread before idle ones are forgotten.
pub const MAX_LANE_LOCKS_PER_THREAD: usize = 10_000;

/// Serialises admission and execution on one durable lane.
pub(super) type LaneLock = Arc<tokio::sync::Mutex<()>>;

/// One thread's live part.
pub(super) struct Thread {
    pub(super) scope: ThreadScope,
    pub(super) documents: StreamKey,
    /// Serialises command execution and document commits on the thread.
    pub(super) exec: tokio::sync::Mutex<()>,
    pub(super) attaches: Mutex<BTreeMap<u64, Arc<Attach>>>,
    /// How many attaches the thread has, for its followers to notice when
    /// the last one ends.
    pub(super) attached: tokio::sync::watch::Sender<usize>,
    /// Derived protocols whose source stream a task follows.
    pub(super) followers: Mutex<BTreeSet<ProtocolName>>,
    /// Whether a task follows the thread's own documents stream (only on
    /// a store other processes append to; set and cleared under
    /// `attaches`' lock).
    pub(super) follows_documents: AtomicBool,
    /// Live compatibility views and what depends on them.
    pub(super) views: LiveViews,
    /// Per durable lane: serialises admission and execution.
    lanes: Mutex<HashMap<(ClientId, ProtocolName), LaneLock>>,
}

impl Thread {
    fn new(scope: &ThreadScope) -> Result<Self, LedgerError> {
        Ok(Self {
            scope: scope.clone(),
            documents: documents_stream(scope)?,
            exec: tokio::sync::Mutex::new(()),
            attaches: Mutex::new(BTreeMap::new()),
            attached: tokio::sync::watch::Sender::new(0),
            followers: Mutex::new(BTreeSet::new()),
            follows_documents: AtomicBool::new(false),
            views: LiveViews::default(),
            lanes: Mutex::new(HashMap::new()),
        })
    }

    /// The thread's attaches now.
    pub(super) fn attaches(&self) -> Vec<Arc<Attach>> {
        lock(&self.attaches).values().cloned().collect()
    }

    pub(super) fn attach_count(&self) -> usize {
        lock(&self.attaches).len()
    }

    /// Whether `client` has a live attach on the thread.
    pub(super) fn is_connected(&self, client: &ClientId) -> bool {
        lock(&self.attaches).values().any(|a| &a.client == client)
    }

    /// Adds `attach`, counting its views live.
    pub(super) fn enter(&self, attach: &Arc<Attach>) {
        let count = {
            let mut attaches = lock(&self.attaches);
            attaches.insert(attach.id, attach.clone());
            attaches.len()
        };
        self.views.hold(&self.scope, &attach.views);
        self.attached.send_replace(count);
    }

    /// Removes `attach` (if it is there), releasing its views.
    pub(super) fn leave(&self, attach: &Attach) {
        let (removed, count) = {
            let mut attaches = lock(&self.attaches);
            let removed = attaches.remove(&attach.id).is_some();
            (removed, attaches.len())
        };
        if removed {
            self.views.release(&self.scope, &attach.views);
        }
        self.attached.send_replace(count);
    }

    /// The lock of `client`'s durable lane on `protocol`.
    pub(super) fn lane_lock(&self, client: &ClientId, protocol: &ProtocolName) -> LaneLock {
        let mut lanes = lock(&self.lanes);
        if lanes.len() >= MAX_LANE_LOCKS_PER_THREAD {
            lanes.retain(|_, l| Arc::strong_count(l) > 1);
        }
        lanes
            .entry((client.clone(), protocol.clone()))
            .or_insert_with(|| Arc::new(tokio::sync::Mutex::new(())))
            .clone()
    }
}

/// The threads in memory.
#[derive(Default)]
pub(super) struct Threads {
    threads: Mutex<HashMap<ThreadScope, Arc<Thread>>>,
}

impl Threads {
    /// The thread's live part, made on first use.
    pub(super) fn open(&self, scope: &ThreadScope) -> Result<Arc<Thread>, LedgerError> {
        let mut threads = lock(&self.threads);
        if let Some(thread) = threads.get(scope) {
            return Ok(thread.clone());
        }
        if threads.len() >= MAX_IDLE_THREADS {
            // Threads nobody holds (no attach, no command in flight) are
            // rebuilt from the ledger when next used.
            threads.retain(|_, thread| Arc::strong_count(thread) > 1);
        }
        let thread = Arc::new(Thread::new(scope)?);
        threads.insert(scope.clone(), thread.clone());
        Ok(thread)
    }

    /// Number of live attaches on a thread.
    pub(super) fn attach_count(&self, scope: &ThreadScope) -> usize {
        lock(&self.threads)
            .get(scope)
            .map_or(0, |thread| thread.attach_count())
    }

    /// The live views of a thread.
    pub(super) fn views(&self, scope: &ThreadScope) -> BTreeMap<ViewKey, ViewStats> {
        lock(&self.threads)
            .get(scope)
            .map(|thread| thread.views.stats())
            .unwrap_or_default()
    }
}

/// One live attach.
pub struct Attach {
    pub id: u64,
    pub(super) thread: Arc<Thread>,
    pub client: ClientId,
    pub attacher: Option<AttacherId>,
    pub principal: Option<PrincipalId>,
    pub selection: Selection,
    pub lease: String,
    /// The compatibility views its selection reads (none: native state).
    pub(super) views: Vec<ViewKey>,
    pub(super) outbox: Outbox,
    pub(super) state: Mutex<AttachState>,
    /// Counted as open (for the drain and the metrics) while it lives.
    pub(super) _open: (Tracked, Open),
}

impl Attach {
    pub fn thread(&self) -> &ThreadId {
        self.thread.scope.id()
    }

    /// The thread with the principal it belongs to.
    pub fn scope(&self) -> &ThreadScope {
        &self.thread.scope
    }

    pub fn is_closed(&self) -> bool {
        self.outbox.is_closed()
    }

    /// The contract the attach selected `protocol` under.
    pub(super) fn contract(&self, protocol: &ProtocolName) -> Option<Contract> {
        self.selection.get(protocol.as_str()).map(|p| Contract {
            wire: self.selection.wire,
            version: p.version,
        })
    }
}

/// What an attach holds besides its selection.
#[derive(Default)]
pub(super) struct AttachState {
    pub(super) table: DocTable,
    pub(super) context: BTreeMap<ProtocolName, (Value, Option<Value>)>,
    pub(super) ephemeral: BTreeMap<DocIdentity, Value>,
    pub(super) included: BTreeSet<DocIdentity>,
    pub(super) lanes: BTreeMap<ProtocolName, EphemeralLane>,
}

/// An ephemeral lane: its watermark and retained answers, which end with
/// the attach.
#[derive(Default)]
pub(super) struct EphemeralLane {
    pub(super) watermark: u64,
    pub(super) answers: BTreeMap<u64, Answer>,
}
