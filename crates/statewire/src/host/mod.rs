//! The Statewire host: the Rust API applications register protocols and
//! command handlers with, and the engine behind both transports.
//!
//! Owns: attaches (selection, lease context, ephemeral documents and
//! lanes, included keys, document table), admission of commands on
//! durable lanes (a durable ledger append at the lane's exact head),
//! execution (one command at a time per thread), durable document commits,
//! answers, and flushing view diffs to every attach of a thread.
//! Memory holds caches of the lane and document folds, plus the live
//! attaches, which are ephemeral by nature.
//! Must never: dispatch a command before its admission is on disk,
//! dispatch an admitted command twice in one host, send an answer before
//! it is recorded, or disclose supported ranges before authentication.

mod adapters;
mod attach;
mod builder;
mod commands;
mod context;
mod follow;
mod projection;
mod queue;
mod source;
mod views;

pub use adapters::{
    Adapter, CommandInfo, CommandUp, CommandsDown, DocumentsDown, ErrorDown, ProjectedDocument,
    ResultDown, StateDown,
};
pub use attach::{AttachHandle, AttachRequest};
pub use builder::{HostBuilder, ProtocolDef};
pub use context::{AttachTxn, CommandContext, NoAttach};
use context::{DocumentCheck, synced_patch, synced_set};
pub use projection::{SLOW_PROJECTION_US, ViewKey, ViewStats};
use queue::{Inbox, Outbox, Pushed};
pub use queue::{MAX_QUEUED_BYTES, MAX_QUEUED_PACKETS, Outbound, QueueLimits};
pub use source::{AsyncHandler, AttachDocuments, Call, DocumentSource, SourceSnapshot};

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;

use crate::ledger::{
    Durability, ExpectedPosition, FoldCache, Ledger, LedgerError, Payload, StreamKey,
};
use crate::statewire::ids::{
    AttacherId, ClientId, PrincipalId, ProtocolName, ThreadId, ThreadScope, random_hex,
};
use crate::statewire::negotiation::{
    self, NegotiationError, ProtocolSupport, Record, SelectedProtocol, Selection,
    SubprotocolSupport, Support,
};
use crate::statewire::packet::{
    Answer, Command, Contract, CtxEntry, Dur, Fin, FinCode, Frame, FrameViolation, Packet,
    Rejection, Syn,
};
use crate::statewire::records::{
    CommandAdmitted, CommandAnsweredUnder, CommandCause, DocumentChange, DocumentsCommitted,
    DocumentsFold, DocumentsState, LaneFold, LaneState, PendingCommand, documents_stream,
    lane_stream,
};
use crate::statewire::statepatch;
use crate::statewire::version::{Version, VersionRange};
use crate::statewire::view::{DocIdentity, DocTable, View};

/// Oldest wire version this host serves.
pub const WIRE_MIN: Version = Version::ymd(2026, 9, 30);
/// Native wire version.
pub const WIRE_MAX: Version = Version::ymd(2026, 11, 2);
/// First wire version with the attach results cursor.
pub const WIRE_RESULTS_CURSOR: Version = Version::ymd(2026, 11, 1);
/// First wire version where every attach names its attacher.
pub const WIRE_NAMED_ATTACHER: Version = Version::ymd(2026, 11, 2);

/// Largest encoded document value (ephemeral or durable), in bytes.
pub const MAX_DOCUMENT_BYTES: usize = 64 * 1024;
/// Most live attaches on one thread.
pub const MAX_ATTACHES_PER_THREAD: usize = 4096;
/// Most documents one command may change.
pub const MAX_CHANGES_PER_COMMAND: usize = 8;
/// Most ephemeral documents one attach may hold.
pub const MAX_EPHEMERAL_DOCUMENTS: usize = 64;
/// Most keyed documents one attach may include.
pub const MAX_INCLUDED_DOCUMENTS: usize = 256;
/// Most executions of one command when a concurrent commit (another host
/// on the same ledger) moves the documents under it.
pub const MAX_COMMIT_ATTEMPTS: usize = 8;
/// Most admission attempts of one batch under concurrent admission.
pub const MAX_ADMIT_ATTEMPTS: usize = 8;
/// Threads kept in memory before those nobody holds are forgotten.
pub const MAX_IDLE_THREADS: usize = 10_000;
/// Lane locks kept per thread before idle ones are forgotten.
pub const MAX_LANE_LOCKS_PER_THREAD: usize = 10_000;

/// Why the host could not be built or could not serve.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("registration: {0}")]
    Registration(String),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// Who sent a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub client_id: ClientId,
    /// The principal the admitting attach authenticated as (the
    /// revision's `auth`); `None` on a host without an authenticator.
    pub principal: Option<PrincipalId>,
    /// Whether the client has a live attach on the thread.
    pub is_connected: bool,
}

/// One protocol's commands as discovery lists them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProtocolCommands {
    pub name: ProtocolName,
    pub version: Version,
    pub commands: Vec<CommandInfo>,
}

/// A context replacement, as delivered to context listeners.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextChange {
    pub thread: ThreadScope,
    pub client: ClientId,
    pub attach: u64,
    pub protocol: ProtocolName,
    pub previous: Option<Value>,
    pub value: Value,
    pub meta: Option<Value>,
}

/// A command handler: `params` in, a result or an application rejection out.
pub type Handler =
    Arc<dyn Fn(&mut CommandContext<'_>, &[Value]) -> Result<Value, Rejection> + Send + Sync>;
/// Validates a context value (with its decoded meta) for a protocol.
pub type ContextValidator = Arc<dyn Fn(&Value, Option<&Value>) -> Result<(), String> + Send + Sync>;
/// Observes accepted context replacements.
pub type ContextListener = Arc<dyn Fn(&ContextChange) + Send + Sync>;
/// Maps a thread and the request's `Authorization` to a principal, or
/// refuses with a sentence saying what to send instead.
pub type Authenticator =
    Arc<dyn Fn(&ThreadId, Option<&str>) -> Result<PrincipalId, String> + Send + Sync>;

struct ProtocolInfo {
    record: Record,
    initial_main: Value,
    /// Where a derived protocol's documents come from.
    source: Option<Arc<dyn DocumentSource>>,
    /// The native version (a child's is its parent's).
    native: Version,
    /// Breaking transitions, oldest first (a child has none: its parent's
    /// convert it).
    adapters: Vec<Adapter>,
    /// The composition the protocol's projections run in, if any.
    group: Option<Arc<[ProtocolName]>>,
}

/// A registered command handler.
#[derive(Clone)]
enum HandlerKind {
    /// Runs against the host's documents, which it may change.
    Sync(Handler),
    /// Runs against the application's own streams.
    Async(AsyncHandler),
}

/// The host. Cheap to clone.
#[derive(Clone)]
pub struct Host {
    inner: Arc<Inner>,
}

struct Inner {
    ledger: Ledger,
    support: Support,
    /// Every protocol by full name (parents and children).
    protocols: BTreeMap<ProtocolName, ProtocolInfo>,
    handlers: HashMap<(ProtocolName, String), HandlerKind>,
    validators: HashMap<ProtocolName, ContextValidator>,
    listeners: HashMap<ProtocolName, Vec<ContextListener>>,
    authenticator: Option<Authenticator>,
    queue: QueueLimits,
    lanes: FoldCache<LaneFold>,
    documents: FoldCache<DocumentsFold>,
    threads: Mutex<HashMap<ThreadScope, Arc<Thread>>>,
    leases: Mutex<HashMap<String, Arc<Attach>>>,
    /// How `/frames` reaches another instance's attaches (set once the
    /// server knows its address; never on a store of one process).
    relay: std::sync::OnceLock<crate::statewire::relay::Relay>,
    next_attach: AtomicU64,
    /// The server's shutdown phase: no attach starts once it drains.
    lifecycle: crate::lifecycle::Lifecycle,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// Serialises admission and execution on one durable lane.
type LaneLock = Arc<tokio::sync::Mutex<()>>;

/// One thread's live part.
struct Thread {
    scope: ThreadScope,
    documents: StreamKey,
    /// Serialises command execution and document commits on the thread.
    exec: tokio::sync::Mutex<()>,
    attaches: Mutex<BTreeMap<u64, Arc<Attach>>>,
    /// How many attaches the thread has, for its followers to notice when
    /// the last one ends.
    attached: tokio::sync::watch::Sender<usize>,
    /// Derived protocols whose source stream a task follows.
    followers: Mutex<BTreeSet<ProtocolName>>,
    /// Whether a task follows the thread's own documents stream (only on
    /// a store other processes append to; set and cleared under
    /// `attaches`' lock).
    follows_documents: std::sync::atomic::AtomicBool,
    /// Live compatibility views and what depends on them.
    views: Mutex<BTreeMap<ViewKey, projection::LiveView>>,
    /// Per durable lane: serialises admission and execution.
    lanes: Mutex<HashMap<(ClientId, ProtocolName), LaneLock>>,
}

/// One live attach.
pub struct Attach {
    pub id: u64,
    thread: Arc<Thread>,
    pub client: ClientId,
    pub attacher: Option<AttacherId>,
    pub principal: Option<PrincipalId>,
    pub selection: Selection,
    pub lease: String,
    /// The compatibility views its selection reads (none: native state).
    views: Vec<ViewKey>,
    outbox: Outbox,
    state: Mutex<AttachState>,
    /// Counted as open (for the drain and the metrics) while it lives.
    _open: (crate::lifecycle::Tracked, crate::telemetry::Open),
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

    fn contract(&self, protocol: &ProtocolName) -> Option<Contract> {
        self.selection.get(protocol.as_str()).map(|p| Contract {
            wire: self.selection.wire,
            version: p.version,
        })
    }
}

#[derive(Default)]
struct AttachState {
    table: DocTable,
    context: BTreeMap<ProtocolName, (Value, Option<Value>)>,
    ephemeral: BTreeMap<DocIdentity, Value>,
    included: BTreeSet<DocIdentity>,
    lanes: BTreeMap<ProtocolName, EphemeralLane>,
}

#[derive(Default)]
struct EphemeralLane {
    watermark: u64,
    answers: BTreeMap<u64, Answer>,
}

fn encoded_len(value: &Value) -> usize {
    serde_json::to_vec(value).map_or(usize::MAX, |v| v.len())
}

fn oversized() -> Rejection {
    Rejection::new(
        "oversized-document",
        format!("documents are limited to {MAX_DOCUMENT_BYTES} bytes"),
    )
}

/// Replaces a leading `"."` with the thread's canonical prefix: its id.
pub fn resolve_key(thread: &ThreadId, key: Vec<String>) -> Vec<String> {
    match key.split_first() {
        Some((first, rest)) if first == "." => std::iter::once(thread.to_string())
            .chain(rest.iter().cloned())
            .collect(),
        _ => key,
    }
}

/// The outcome of executing one command.
type Outcome = Result<Value, Rejection>;

fn answer(
    protocol: &ProtocolName,
    seq: u64,
    outcome: Outcome,
    contract: Option<Contract>,
) -> Answer {
    let (ok, err) = match outcome {
        Ok(value) => (Some(value), None),
        Err(rejection) => (None, Some(rejection)),
    };
    Answer {
        protocol: protocol.clone(),
        seq,
        ok,
        err,
        contract,
    }
}

fn outcome_json(outcome: &Outcome) -> (bool, String) {
    match outcome {
        Ok(value) => (true, value.to_string()),
        Err(rejection) => (
            false,
            serde_json::to_string(rejection).unwrap_or_else(|_| "{}".into()),
        ),
    }
}

fn outcome_from(ok: bool, value: &Value) -> Outcome {
    if ok {
        Ok(value.clone())
    } else {
        Err(serde_json::from_value(value.clone())
            .unwrap_or_else(|_| Rejection::new("unreadable-answer", "")))
    }
}

/// A failure of the host's own, as the `fin` that ends what it broke.
/// Damage to the thread's records is named and final (`thread-damaged`);
/// an unavailable store is the retryable `store-unavailable` (503);
/// anything else the generic, retryable `server-error`.
fn server_fin(error: impl Failure) -> Fin {
    match error.ledger() {
        Some(LedgerError::Corrupt {
            position,
            corruption,
            ..
        }) => {
            tracing::error!(%error, "refusing a damaged statewire thread");
            Fin::new(
                FinCode::ThreadDamaged,
                format!(
                    "this thread's records are damaged from position {position} ({corruption}), so it cannot be served; an operator must restore the store from a backup (`ledgerwire log verify` names the damage)"
                ),
            )
        }
        Some(LedgerError::Fold {
            position, reason, ..
        }) => {
            tracing::error!(%error, "refusing a statewire thread that does not fold");
            Fin::new(
                FinCode::ThreadDamaged,
                format!(
                    "this thread's record at position {position} cannot be read ({reason}), so it cannot be served; an operator must look at it (`ledgerwire log dump` shows it)"
                ),
            )
        }
        Some(LedgerError::Unavailable { .. }) => {
            // The store reports its outage once; each refusal is routine.
            tracing::debug!(%error, "the store is unavailable to a statewire thread");
            Fin::new(
                FinCode::StoreUnavailable,
                "the store cannot be reached now and nothing of this statement was recorded; attach again and retry shortly (here or on another instance): unanswered commands are sent again and run once",
            )
        }
        _ => {
            tracing::error!(%error, "statewire host failure");
            Fin::new(
                FinCode::ServerError,
                "the host could not record the statement",
            )
        }
    }
}

/// A ledger failure met outside the host (the HTTP transport's relay),
/// as the `fin` the host would end with.
pub fn store_fin(error: &LedgerError) -> Fin {
    server_fin(error)
}

/// The same failure, as the violation a frame's handler returns.
fn server_violation(error: impl Failure) -> FrameViolation {
    let fin = server_fin(error);
    FrameViolation {
        code: fin.code,
        message: fin.message,
    }
}

/// An error the host can fail with: the ledger error inside it, if any,
/// decides whether it is damage.
trait Failure: std::fmt::Display {
    fn ledger(&self) -> Option<&LedgerError> {
        None
    }
}

impl Failure for LedgerError {
    fn ledger(&self) -> Option<&LedgerError> {
        Some(self)
    }
}

impl Failure for HostError {
    fn ledger(&self) -> Option<&LedgerError> {
        match self {
            HostError::Ledger(error) => Some(error),
            HostError::Registration(_) => None,
        }
    }
}

/// A failure described only in words (never damage).
impl Failure for String {}

impl<T: Failure + ?Sized> Failure for &T {
    fn ledger(&self) -> Option<&LedgerError> {
        (**self).ledger()
    }
}

fn fin_violation(violation: &FrameViolation) -> Fin {
    Fin::new(violation.code, violation.message.clone())
}

impl Host {
    pub fn builder() -> HostBuilder {
        HostBuilder::default()
    }

    /// What this host serves (wire range and protocols).
    pub fn support(&self) -> &Support {
        &self.inner.support
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
        match &self.inner.authenticator {
            None => Ok(None),
            Some(authenticate) => authenticate(thread, authorization)
                .map(Some)
                .map_err(|message| Fin::new(FinCode::Unauthorized, message)),
        }
    }

    /// The live attach a lease names.
    pub fn lease(&self, lease: &str) -> Option<Arc<Attach>> {
        lock(&self.inner.leases).get(lease).cloned()
    }

    /// Lets `/frames` reach this host's attaches from other instances,
    /// and relay there (see [`crate::statewire::relay`]); set once.
    pub fn serve_relay(&self, relay: crate::statewire::relay::Relay) {
        let _ = self.inner.relay.set(relay);
    }

    /// The relay, on a store several instances share.
    pub fn relay(&self) -> Option<&crate::statewire::relay::Relay> {
        self.inner.relay.get()
    }

    fn thread(&self, scope: &ThreadScope) -> Result<Arc<Thread>, Fin> {
        let mut threads = lock(&self.inner.threads);
        if let Some(thread) = threads.get(scope) {
            return Ok(thread.clone());
        }
        if threads.len() >= MAX_IDLE_THREADS {
            // Threads nobody holds (no attach, no command in flight) are
            // rebuilt from the ledger when next used.
            threads.retain(|_, thread| Arc::strong_count(thread) > 1);
        }
        let documents = documents_stream(scope).map_err(server_fin)?;
        let thread = Arc::new(Thread {
            scope: scope.clone(),
            documents,
            exec: tokio::sync::Mutex::new(()),
            attaches: Mutex::new(BTreeMap::new()),
            attached: tokio::sync::watch::Sender::new(0),
            followers: Mutex::new(BTreeSet::new()),
            follows_documents: std::sync::atomic::AtomicBool::new(false),
            views: Mutex::new(BTreeMap::new()),
            lanes: Mutex::new(HashMap::new()),
        });
        threads.insert(scope.clone(), thread.clone());
        Ok(thread)
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

    fn info(&self, protocol: &ProtocolName) -> Option<&ProtocolInfo> {
        self.inner.protocols.get(protocol)
    }

    /// A protocol's adapters, oldest first (none for a child).
    pub(super) fn adapters_of(&self, protocol: &ProtocolName) -> &[Adapter] {
        self.info(protocol)
            .map_or(&[], |info| info.adapters.as_slice())
    }

    /// A protocol's native version.
    pub(super) fn native_of(&self, protocol: &ProtocolName) -> Version {
        self.info(protocol).map_or(WIRE_MIN, |info| info.native)
    }

    /// A native answer, encoded in `from`, as `attach`'s contract reads it.
    pub(super) fn lowered_for(&self, attach: &Attach, native: Answer, from: Version) -> Answer {
        let Some(to) = attach
            .selection
            .get(native.protocol.as_str())
            .map(|p| p.version)
        else {
            return native;
        };
        let adapters = self.adapters_of(&native.protocol);
        if adapters.is_empty() {
            return native;
        }
        let outcome = match (native.ok, native.err) {
            (Some(value), _) => Ok(value),
            (None, Some(rejection)) => Err(rejection),
            (None, None) => Ok(Value::Null),
        };
        let lowered = adapters::lower(&native.protocol, adapters, from, to, outcome);
        answer(&native.protocol, native.seq, lowered, native.contract)
    }

    /// A retained answer as `attach` reads it: with the contract its
    /// command was admitted under, lowered from the one it is encoded in.
    pub(super) fn retained_for(
        &self,
        attach: &Attach,
        protocol: &ProtocolName,
        seq: u64,
        retained: &crate::statewire::records::RetainedAnswer,
    ) -> Answer {
        let contract = match (
            Version::parse(&retained.wire_version),
            Version::parse(&retained.protocol_version),
        ) {
            (Ok(wire), Ok(version)) => Some(Contract { wire, version }),
            _ => None,
        };
        let native = answer(
            protocol,
            seq,
            outcome_from(retained.ok, &retained.answer.0),
            contract,
        );
        let from =
            Version::parse(&retained.answer_version).unwrap_or_else(|_| self.native_of(protocol));
        self.lowered_for(attach, native, from)
    }

    /// Authenticates and negotiates `request` without attaching: the
    /// selection an attach with these fields would get.
    pub fn select(&self, request: &AttachRequest) -> Result<Selection, Fin> {
        let thread = ThreadId::new(request.thread.as_str())
            .map_err(|e| Fin::new(FinCode::InvalidNegotiation, e.to_string()))?;
        self.authenticate(&thread, request.authorization.as_deref())?;
        let support = &self.inner.support;
        let offer =
            negotiation::read_offer(request.version.as_deref(), request.protocol.as_deref())
                .map_err(|e| Fin::negotiation(&e, support))?;
        negotiation::negotiate(support, &offer).map_err(|e| Fin::negotiation(&e, support))
    }

    /// The commands an attach with `selection` may send, per selected
    /// protocol, as its contract names them (discovery).
    pub fn commands(&self, selection: &Selection) -> Vec<ProtocolCommands> {
        selection
            .protocols
            .iter()
            .map(|selected| {
                let mut native: Vec<CommandInfo> = self
                    .inner
                    .handlers
                    .keys()
                    .filter(|(protocol, _)| protocol == &selected.name)
                    .map(|(_, method)| CommandInfo {
                        method: method.clone(),
                        description: None,
                    })
                    .collect();
                native.sort_by(|a, b| a.method.cmp(&b.method));
                let adapters = self.adapters_of(&selected.name);
                let mut commands = adapters::discover(adapters, selected.version, native);
                commands.sort_by(|a, b| a.method.cmp(&b.method));
                ProtocolCommands {
                    name: selected.name.clone(),
                    version: selected.version,
                    commands,
                }
            })
            .collect()
    }

    /// Number of live attaches on a thread.
    pub fn attach_count(&self, thread: &ThreadScope) -> usize {
        lock(&self.inner.threads)
            .get(thread)
            .map_or(0, |t| lock(&t.attaches).len())
    }
}

fn expired() -> Rejection {
    Rejection::new(
        "answer-expired",
        "the command was admitted but its answer is no longer retained",
    )
}

fn gap(protocol: &ProtocolName, watermark: u64, seq: u64) -> FrameViolation {
    FrameViolation {
        code: FinCode::SequenceGap,
        message: format!("{protocol}: seq {seq} after watermark {watermark}"),
    }
}
