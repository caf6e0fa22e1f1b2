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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use tokio::sync::mpsc;

use crate::ledger::{
    Durability, ExpectedPosition, FoldCache, Ledger, LedgerError, Payload, StreamKey,
};
use crate::statewire::ids::{AttacherId, ClientId, ProtocolName, ThreadId, random_hex};
use crate::statewire::negotiation::{
    self, NegotiationError, ProtocolSupport, Record, Selection, SubprotocolSupport, Support,
};
use crate::statewire::packet::{
    Answer, Command, Contract, CtxEntry, Dur, Fin, FinCode, Frame, FrameViolation, Packet,
    Rejection, Syn,
};
use crate::statewire::records::{
    CommandAdmitted, CommandAnswered, CommandCause, DocumentChange, DocumentsCommitted,
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
/// Packets queued for one attach before it is dropped as too slow.
pub const MAX_QUEUED_PACKETS: usize = 1024;
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
    /// The principal the admitting attach authenticated as.
    pub auth: Option<String>,
    /// Whether the client has a live attach on the thread.
    pub is_connected: bool,
}

/// A context replacement, as delivered to context listeners.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextChange {
    pub thread: ThreadId,
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
/// Maps a thread and the request's `Authorization` to a principal, or refuses.
pub type Authenticator =
    Arc<dyn Fn(&ThreadId, Option<&str>) -> Result<Option<String>, ()> + Send + Sync>;

/// A protocol registration.
#[derive(Clone, Debug)]
pub struct ProtocolDef {
    name: String,
    version: Version,
    min_version: Version,
    subprotocols: Vec<(String, Record)>,
    requires: Vec<(String, Version, Version)>,
    initial_main: Value,
}

impl ProtocolDef {
    /// A protocol whose native (and only) version is `version`.
    pub fn new(name: &str, version: Version) -> Self {
        Self {
            name: name.to_owned(),
            version,
            min_version: version,
            subprotocols: Vec::new(),
            requires: Vec::new(),
            initial_main: Value::Object(Default::default()),
        }
    }

    /// Oldest version served (adapters arrive in a later issue).
    pub fn min_version(mut self, min: Version) -> Self {
        self.min_version = min;
        self
    }

    /// A child `<name>/<child>`, durable or ephemeral.
    pub fn subprotocol(mut self, child: &str, record: Record) -> Self {
        self.subprotocols.push((child.to_owned(), record));
        self
    }

    /// A dependency: `protocol` must be selected with a version in range.
    pub fn requires(mut self, protocol: &str, min: Version, max: Version) -> Self {
        self.requires.push((protocol.to_owned(), min, max));
        self
    }

    /// The main document's value before any command sets it.
    pub fn initial_main(mut self, value: Value) -> Self {
        self.initial_main = value;
        self
    }
}

/// Collects registrations; [`HostBuilder::build`] validates them.
pub struct HostBuilder {
    wire: (Version, Version),
    protocols: Vec<ProtocolDef>,
    handlers: Vec<(String, String, Handler)>,
    validators: Vec<(String, ContextValidator)>,
    listeners: Vec<(String, ContextListener)>,
    synced: Vec<String>,
    authenticator: Option<Authenticator>,
}

impl Default for HostBuilder {
    fn default() -> Self {
        Self {
            wire: (WIRE_MIN, WIRE_MAX),
            protocols: Vec::new(),
            handlers: Vec::new(),
            validators: Vec::new(),
            listeners: Vec::new(),
            synced: Vec::new(),
            authenticator: None,
        }
    }
}

impl HostBuilder {
    /// Narrows the served wire range (within 2026-09-30..=2026-11-02).
    pub fn wire_range(mut self, min: Version, max: Version) -> Self {
        self.wire = (min, max);
        self
    }

    pub fn protocol(mut self, def: ProtocolDef) -> Self {
        self.protocols.push(def);
        self
    }

    /// Routes `method` on `protocol` (a parent or a child) to `handler`.
    pub fn command(
        mut self,
        protocol: &str,
        method: &str,
        handler: impl Fn(&mut CommandContext<'_>, &[Value]) -> Result<Value, Rejection>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.handlers
            .push((protocol.to_owned(), method.to_owned(), Arc::new(handler)));
        self
    }

    /// Installs `set` and `patch` on an ephemeral subprotocol's main
    /// document: a client-owned synced document.
    pub fn synced_document(mut self, protocol: &str) -> Self {
        self.synced.push(protocol.to_owned());
        self.command(protocol, "set", synced_set)
            .command(protocol, "patch", synced_patch)
    }

    pub fn context_validator(
        mut self,
        protocol: &str,
        validator: impl Fn(&Value, Option<&Value>) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.validators
            .push((protocol.to_owned(), Arc::new(validator)));
        self
    }

    pub fn on_context(
        mut self,
        protocol: &str,
        listener: impl Fn(&ContextChange) + Send + Sync + 'static,
    ) -> Self {
        self.listeners
            .push((protocol.to_owned(), Arc::new(listener)));
        self
    }

    pub fn authenticator(
        mut self,
        authenticate: impl Fn(&ThreadId, Option<&str>) -> Result<Option<String>, ()>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.authenticator = Some(Arc::new(authenticate));
        self
    }

    /// Validates every registration and starts a host on `ledger`.
    pub fn build(self, ledger: Ledger) -> Result<Host, HostError> {
        let bad = |m: String| HostError::Registration(m);
        let wire = VersionRange::new(self.wire.0, self.wire.1).map_err(|e| bad(e.to_string()))?;
        if wire.min() < WIRE_MIN || wire.max() > WIRE_MAX {
            return Err(bad(format!(
                "this build serves wire versions {WIRE_MIN}..={WIRE_MAX} only"
            )));
        }
        let mut protocols: BTreeMap<ProtocolName, ProtocolInfo> = BTreeMap::new();
        let mut support = Support {
            wire,
            protocols: Vec::new(),
        };
        for def in &self.protocols {
            let name = ProtocolName::new(def.name.as_str()).map_err(|e| bad(e.to_string()))?;
            if name.parent().is_some() {
                return Err(bad(format!("{name}: a parent name has no '/'")));
            }
            let range = VersionRange::new(def.min_version, def.version)
                .map_err(|e| bad(format!("{name}: {e}")))?;
            let mut subprotocols = Vec::new();
            for (child, record) in &def.subprotocols {
                if child.contains('/') {
                    return Err(bad(format!("{name}/{child}: nested children")));
                }
                let full = name.child(child).map_err(|e| bad(e.to_string()))?;
                subprotocols.push(SubprotocolSupport {
                    name: child.clone(),
                    record: *record,
                });
                protocols.insert(
                    full,
                    ProtocolInfo {
                        record: *record,
                        initial_main: Value::Object(Default::default()),
                    },
                );
            }
            let requires = def
                .requires
                .iter()
                .map(|(dep, min, max)| {
                    let dep = ProtocolName::new(dep.as_str()).map_err(|e| bad(e.to_string()))?;
                    let range =
                        VersionRange::new(*min, *max).map_err(|e| bad(format!("{name}: {e}")))?;
                    Ok((dep, range))
                })
                .collect::<Result<Vec<_>, HostError>>()?;
            if protocols
                .insert(
                    name.clone(),
                    ProtocolInfo {
                        record: Record::Durable,
                        initial_main: def.initial_main.clone(),
                    },
                )
                .is_some()
            {
                return Err(bad(format!("{name} is registered twice")));
            }
            support.protocols.push(ProtocolSupport {
                name,
                range,
                subprotocols,
                requires,
            });
        }
        for p in &support.protocols {
            for (dep, _) in &p.requires {
                if !support.protocols.iter().any(|q| &q.name == dep) {
                    return Err(bad(format!("{} requires unregistered {dep}", p.name)));
                }
            }
        }
        let known = |protocol: &str| -> Result<ProtocolName, HostError> {
            let name = ProtocolName::new(protocol).map_err(|e| bad(e.to_string()))?;
            if !protocols.contains_key(&name) {
                return Err(bad(format!("{name} is not registered")));
            }
            Ok(name)
        };
        for synced in &self.synced {
            let name = known(synced)?;
            if protocols.get(&name).map(|p| p.record) != Some(Record::Ephemeral) {
                return Err(bad(format!(
                    "{name}: a synced document needs an ephemeral protocol"
                )));
            }
        }
        let mut handlers = HashMap::new();
        for (protocol, method, handler) in self.handlers {
            let name = known(&protocol)?;
            if handlers.insert((name, method.clone()), handler).is_some() {
                return Err(bad(format!("{protocol}.{method} is registered twice")));
            }
        }
        let mut validators = HashMap::new();
        for (protocol, validator) in self.validators {
            validators.insert(known(&protocol)?, validator);
        }
        let mut listeners: HashMap<ProtocolName, Vec<ContextListener>> = HashMap::new();
        for (protocol, listener) in self.listeners {
            listeners
                .entry(known(&protocol)?)
                .or_default()
                .push(listener);
        }
        Ok(Host {
            inner: Arc::new(Inner {
                lanes: FoldCache::new(ledger.clone()),
                documents: FoldCache::new(ledger.clone()),
                ledger,
                support,
                protocols,
                handlers,
                validators,
                listeners,
                authenticator: self.authenticator,
                threads: Mutex::new(HashMap::new()),
                leases: Mutex::new(HashMap::new()),
                next_attach: AtomicU64::new(1),
            }),
        })
    }
}

struct ProtocolInfo {
    record: Record,
    initial_main: Value,
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
    handlers: HashMap<(ProtocolName, String), Handler>,
    validators: HashMap<ProtocolName, ContextValidator>,
    listeners: HashMap<ProtocolName, Vec<ContextListener>>,
    authenticator: Option<Authenticator>,
    lanes: FoldCache<LaneFold>,
    documents: FoldCache<DocumentsFold>,
    threads: Mutex<HashMap<ThreadId, Arc<Thread>>>,
    leases: Mutex<HashMap<String, Arc<Attach>>>,
    next_attach: AtomicU64,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// Serialises admission on one durable lane; holds `true` once the
/// lane's crash-interrupted commands are finished.
type LaneLock = Arc<tokio::sync::Mutex<bool>>;

/// One thread's live part.
struct Thread {
    id: ThreadId,
    documents: StreamKey,
    /// Serialises command execution and document commits on the thread.
    exec: tokio::sync::Mutex<()>,
    attaches: Mutex<BTreeMap<u64, Arc<Attach>>>,
    /// Per durable lane: serialises admission; `true` once recovered.
    lanes: Mutex<HashMap<(ClientId, ProtocolName), LaneLock>>,
}

/// One live attach.
pub struct Attach {
    pub id: u64,
    thread: Arc<Thread>,
    pub client: ClientId,
    pub attacher: Option<AttacherId>,
    pub principal: Option<String>,
    pub selection: Selection,
    pub lease: String,
    sender: mpsc::Sender<Packet>,
    closed: AtomicBool,
    state: Mutex<AttachState>,
}

impl Attach {
    pub fn thread(&self) -> &ThreadId {
        &self.thread.id
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
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
    packets: mpsc::Receiver<Packet>,
    pub after_hello: Frame,
}

impl AttachHandle {
    /// The next packet; `None` once the attach has ended.
    pub async fn next(&mut self) -> Option<Packet> {
        if self.attach.is_closed() && self.packets.is_empty() {
            return None;
        }
        self.packets.recv().await
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

/// The handler's view of one command.
pub struct CommandContext<'a> {
    caller: Caller,
    thread: &'a ThreadId,
    protocol: &'a ProtocolName,
    contract: Contract,
    context: Option<Value>,
    host: &'a Inner,
    documents: &'a DocumentsState,
    staged: BTreeMap<(ProtocolName, Option<Vec<String>>), Option<Value>>,
    attach: Option<AttachTxn>,
}

/// Reading `ctx.attach()` during in-process dispatch (recovery after a
/// restart): there is no admitting attach.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("this command runs without an attach (in-process dispatch)")]
pub struct NoAttach;

impl From<NoAttach> for Rejection {
    fn from(_: NoAttach) -> Self {
        Rejection::new("no-attach", "the command has no admitting attach")
    }
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

/// Replaces a leading `"."` with the thread's canonical prefix.
pub fn resolve_key(thread: &ThreadId, key: Vec<String>) -> Vec<String> {
    match key.split_first() {
        Some((first, rest)) if first == "." => std::iter::once(thread.to_string())
            .chain(rest.iter().cloned())
            .collect(),
        _ => key,
    }
}

impl CommandContext<'_> {
    pub fn caller(&self) -> &Caller {
        &self.caller
    }

    pub fn thread(&self) -> &ThreadId {
        self.thread
    }

    /// The protocol the command was sent on (full name).
    pub fn protocol(&self) -> &ProtocolName {
        self.protocol
    }

    /// The contract the command was admitted under (feature checks).
    pub fn contract(&self) -> Contract {
        self.contract
    }

    /// This protocol's lease context on the admitting attach.
    pub fn context(&self) -> Option<&Value> {
        self.context.as_ref()
    }

    fn protocol_name(&self, protocol: &str) -> Result<ProtocolName, Rejection> {
        let name = ProtocolName::new(protocol)
            .map_err(|e| Rejection::new("unknown-protocol", e.to_string()))?;
        if !self.host.protocols.contains_key(&name) {
            return Err(Rejection::new("unknown-protocol", format!("{name}")));
        }
        Ok(name)
    }

    /// A durable protocol's main document (staged changes included).
    pub fn main(&self, protocol: &str) -> Option<Value> {
        let name = self.protocol_name(protocol).ok()?;
        self.read(&name, None).or_else(|| {
            self.host
                .protocols
                .get(&name)
                .filter(|p| p.record == Record::Durable)
                .map(|p| p.initial_main.clone())
        })
    }

    /// A durable keyed document (relative keys resolve to the thread).
    pub fn document(&self, protocol: &str, key: Vec<String>) -> Option<Value> {
        let name = self.protocol_name(protocol).ok()?;
        self.read(&name, Some(resolve_key(self.thread, key)))
    }

    fn read(&self, name: &ProtocolName, key: Option<Vec<String>>) -> Option<Value> {
        let id = (name.clone(), key);
        if let Some(staged) = self.staged.get(&id) {
            return staged.clone();
        }
        self.documents
            .documents
            .get(&(id.0.to_string(), id.1))
            .map(|json| json.0.clone())
    }

    /// Replaces a durable protocol's main document.
    pub fn set_main(&mut self, protocol: &str, value: Value) -> Result<(), Rejection> {
        let name = self.protocol_name(protocol)?;
        self.stage(name, None, Some(value))
    }

    /// Sets (or with `None` removes) a durable keyed document.
    pub fn set_document(
        &mut self,
        protocol: &str,
        key: Vec<String>,
        value: Option<Value>,
    ) -> Result<(), Rejection> {
        let name = self.protocol_name(protocol)?;
        let key = resolve_key(self.thread, key);
        self.stage(name, Some(key), value)
    }

    fn stage(
        &mut self,
        name: ProtocolName,
        key: Option<Vec<String>>,
        value: Option<Value>,
    ) -> Result<(), Rejection> {
        if self.host.protocols.get(&name).map(|p| p.record) != Some(Record::Durable) {
            return Err(Rejection::new(
                "not-durable",
                format!("{name} documents belong to attaches"),
            ));
        }
        if value
            .as_ref()
            .is_some_and(|v| encoded_len(v) > MAX_DOCUMENT_BYTES)
        {
            return Err(oversized());
        }
        if self.staged.len() >= MAX_CHANGES_PER_COMMAND
            && !self.staged.contains_key(&(name.clone(), key.clone()))
        {
            return Err(Rejection::new(
                "too-many-changes",
                "one command changes at most 8 documents",
            ));
        }
        self.staged.insert((name, key), value);
        Ok(())
    }

    /// The admitting attach; an error during in-process dispatch.
    pub fn attach(&mut self) -> Result<&mut AttachTxn, NoAttach> {
        self.attach.as_mut().ok_or(NoAttach)
    }
}

/// A command's handle on its admitting attach: ephemeral documents and
/// included keyed documents. Changes apply when the command succeeds.
pub struct AttachTxn {
    thread: ThreadId,
    selection: Selection,
    ephemeral: BTreeMap<DocIdentity, Value>,
    included: BTreeSet<DocIdentity>,
}

impl AttachTxn {
    fn ephemeral_protocol(&self, protocol: &str) -> Result<ProtocolName, Rejection> {
        match self.selection.get(protocol) {
            Some(p) if p.record == Record::Ephemeral => Ok(p.name.clone()),
            Some(_) => Err(Rejection::new(
                "not-ephemeral",
                format!("{protocol} is durable"),
            )),
            None => Err(Rejection::new("unselected-protocol", protocol.to_owned())),
        }
    }

    fn identity(
        &self,
        protocol: ProtocolName,
        key: Option<Vec<String>>,
        main: bool,
    ) -> DocIdentity {
        DocIdentity {
            protocol,
            main,
            key: key.map(|k| resolve_key(&self.thread, k)),
        }
    }

    /// An ephemeral document of this attach: by key, or (key `None`) the
    /// protocol's main document.
    pub fn document(&self, protocol: &str, key: Option<Vec<String>>) -> Option<&Value> {
        let name = ProtocolName::new(protocol).ok()?;
        match key {
            None => self
                .ephemeral
                .iter()
                .find(|(id, _)| id.protocol == name && id.main)
                .map(|(_, v)| v),
            Some(key) => self.ephemeral.get(&self.identity(name, Some(key), false)),
        }
    }

    /// Mounts (or replaces) a document of an ephemeral protocol.
    pub fn mount(
        &mut self,
        protocol: &str,
        value: Value,
        key: Option<Vec<String>>,
        main: bool,
    ) -> Result<(), Rejection> {
        let name = self.ephemeral_protocol(protocol)?;
        if !main && key.is_none() {
            return Err(Rejection::new(
                "invalid-mount",
                "a document needs a key or main",
            ));
        }
        if encoded_len(&value) > MAX_DOCUMENT_BYTES {
            return Err(oversized());
        }
        let identity = self.identity(name, key, main);
        if main
            && self
                .ephemeral
                .keys()
                .any(|id| id.main && id.protocol == identity.protocol && id != &identity)
        {
            return Err(Rejection::new(
                "second-main",
                "one main document per protocol",
            ));
        }
        if !self.ephemeral.contains_key(&identity)
            && self.ephemeral.len() >= MAX_EPHEMERAL_DOCUMENTS
        {
            return Err(Rejection::new(
                "too-many-documents",
                "attach document limit reached",
            ));
        }
        self.ephemeral.insert(identity, value);
        Ok(())
    }

    /// Unmounts an ephemeral document (key `None`: the main one).
    pub fn unmount(&mut self, protocol: &str, key: Option<Vec<String>>) -> Result<bool, Rejection> {
        let name = self.ephemeral_protocol(protocol)?;
        let before = self.ephemeral.len();
        match key {
            None => self
                .ephemeral
                .retain(|id, _| !(id.protocol == name && id.main)),
            Some(key) => {
                let identity = self.identity(name, Some(key), false);
                self.ephemeral.remove(&identity);
            }
        }
        Ok(self.ephemeral.len() != before)
    }

    /// Includes a durable keyed document in this attach's view.
    pub fn include(&mut self, protocol: &str, key: Vec<String>) -> Result<(), Rejection> {
        let name = self.selected(protocol)?;
        if self.included.len() >= MAX_INCLUDED_DOCUMENTS {
            return Err(Rejection::new(
                "too-many-documents",
                "include limit reached",
            ));
        }
        let identity = self.identity(name, Some(key), false);
        self.included.insert(identity);
        Ok(())
    }

    /// Removes a keyed document from this attach's view.
    pub fn exclude(&mut self, protocol: &str, key: Vec<String>) -> Result<(), Rejection> {
        let name = self.selected(protocol)?;
        let identity = self.identity(name, Some(key), false);
        self.included.remove(&identity);
        Ok(())
    }

    fn selected(&self, protocol: &str) -> Result<ProtocolName, Rejection> {
        self.selection
            .get(protocol)
            .map(|p| p.name.clone())
            .ok_or_else(|| Rejection::new("unselected-protocol", protocol.to_owned()))
    }
}

/// `set [value]` on a synced document.
fn synced_set(ctx: &mut CommandContext<'_>, params: &[Value]) -> Result<Value, Rejection> {
    let [value] = params else {
        return Err(Rejection::new("invalid-params", "set takes [value]"));
    };
    let protocol = ctx.protocol().to_string();
    let attach = ctx.attach()?;
    attach.mount(&protocol, value.clone(), None, true)?;
    Ok(Value::Null)
}

/// `patch [ops]` on a synced document.
fn synced_patch(ctx: &mut CommandContext<'_>, params: &[Value]) -> Result<Value, Rejection> {
    let [ops] = params else {
        return Err(Rejection::new("invalid-patch", "patch takes [ops]"));
    };
    let ops = statepatch::parse(ops).map_err(|e| Rejection::new("invalid-patch", e.to_string()))?;
    let protocol = ctx.protocol().to_string();
    let attach = ctx.attach()?;
    let Some(document) = attach.document(&protocol, None) else {
        return Err(Rejection::new("no-document", "patch before any set"));
    };
    let mut document = document.clone();
    statepatch::apply(&mut document, &ops)
        .map_err(|e| Rejection::new("invalid-patch", e.to_string()))?;
    attach.mount(&protocol, document, None, true)?;
    Ok(Value::Null)
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

fn server_fin(error: impl std::fmt::Display) -> Fin {
    tracing::error!(%error, "statewire host failure");
    Fin::new(
        FinCode::ServerError,
        "the host could not record the statement",
    )
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

    /// Runs the authenticator (every transport calls this first).
    pub fn authenticate(
        &self,
        thread: &ThreadId,
        authorization: Option<&str>,
    ) -> Result<Option<String>, Fin> {
        match &self.inner.authenticator {
            None => Ok(None),
            Some(authenticate) => authenticate(thread, authorization)
                .map_err(|()| Fin::new(FinCode::Unauthorized, "credentials refused")),
        }
    }

    /// The live attach a lease names.
    pub fn lease(&self, lease: &str) -> Option<Arc<Attach>> {
        lock(&self.inner.leases).get(lease).cloned()
    }

    fn thread(&self, id: &ThreadId) -> Result<Arc<Thread>, Fin> {
        let mut threads = lock(&self.inner.threads);
        if let Some(thread) = threads.get(id) {
            return Ok(thread.clone());
        }
        let documents = documents_stream(id).map_err(server_fin)?;
        let thread = Arc::new(Thread {
            id: id.clone(),
            documents,
            exec: tokio::sync::Mutex::new(()),
            attaches: Mutex::new(BTreeMap::new()),
            lanes: Mutex::new(HashMap::new()),
        });
        threads.insert(id.clone(), thread.clone());
        Ok(thread)
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
        let thread = self.thread(&thread_id)?;
        if lock(&thread.attaches).len() >= MAX_ATTACHES_PER_THREAD {
            return Err(Fin::new(
                FinCode::TooManyAttaches,
                "the thread has too many attaches",
            ));
        }
        let (sender, packets) = mpsc::channel(MAX_QUEUED_PACKETS);
        let attach = Arc::new(Attach {
            id: self.inner.next_attach.fetch_add(1, Ordering::Relaxed),
            thread: thread.clone(),
            client,
            attacher,
            principal,
            selection,
            lease: random_hex(),
            sender,
            closed: AtomicBool::new(false),
            state: Mutex::new(AttachState::default()),
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
                    lane_stream(&thread.id, &attach.client, &p.name).map_err(server_fin)?;
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
                let lane = self.inner.lanes.state(stream).map_err(server_fin)?;
                let above = cursor.get(name).copied().unwrap_or(0);
                for (seq, retained) in lane.state.answers.range(above + 1..) {
                    hello_answers.push(retained_answer(name, *seq, retained));
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
        {
            let documents = self
                .inner
                .documents
                .state(&thread.documents)
                .map_err(server_fin)?;
            let mut state = lock(&attach.state);
            let mut watermarks = BTreeMap::new();
            for (name, stream) in &durable_lanes {
                let lane = self.inner.lanes.state(stream).map_err(server_fin)?;
                watermarks.insert(name.as_str().to_owned(), lane.state.watermark);
            }
            for (name, lane) in &state.lanes {
                watermarks.insert(name.as_str().to_owned(), lane.watermark);
            }
            let view = self.view(&attach, &state, &documents.state);
            let ops = state.table.update(&view);
            let syn = Syn::hello(&attach.selection, &attach.client, |name| {
                watermarks.get(name).copied().unwrap_or(0)
            });
            let hello = Packet {
                syn: Some(syn),
                ops,
                ans: hello_answers,
                ..Packet::default()
            };
            // The channel is new and empty: this cannot be full.
            let _ = attach.sender.try_send(hello);
            lock(&thread.attaches).insert(attach.id, attach.clone());
        }
        lock(&self.inner.leases).insert(attach.lease.clone(), attach.clone());
        Ok(AttachHandle {
            host: self.clone(),
            attach,
            packets,
            after_hello: Frame {
                ctx: Vec::new(),
                cmd: durable_cmds,
            },
        })
    }

    /// Ends an attach with `fin` (sent if the queue has room).
    pub fn end(&self, attach: &Arc<Attach>, fin: Fin) {
        if !attach.closed.swap(true, Ordering::AcqRel) {
            let _ = attach.sender.try_send(Packet::fin(fin));
        }
        self.detach(attach);
    }

    /// Forgets an attach: its lease, its ephemeral lanes and documents.
    pub fn detach(&self, attach: &Arc<Attach>) {
        attach.closed.store(true, Ordering::Release);
        lock(&attach.thread.attaches).remove(&attach.id);
        lock(&self.inner.leases).remove(&attach.lease);
    }

    fn check_context(&self, selection: &Selection, entry: &CtxEntry) -> Result<(), FrameViolation> {
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

    fn install_context(&self, attach: &Arc<Attach>, entry: &CtxEntry) {
        let previous = lock(&attach.state)
            .context
            .insert(
                entry.protocol.clone(),
                (entry.value.clone(), entry.meta.clone()),
            )
            .map(|(value, _)| value);
        if let Some(listeners) = self.inner.listeners.get(&entry.protocol) {
            let change = ContextChange {
                thread: attach.thread.id.clone(),
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
                            self.flush_attach(attach, vec![answer], Vec::new());
                        }
                    }
                }
                Some(Record::Durable) => self.run_durable(attach, &protocol, run).await?,
            }
        }
        Ok(())
    }

    fn send(&self, attach: &Arc<Attach>, packet: Packet) {
        if packet.is_empty() || attach.is_closed() {
            return;
        }
        if attach.sender.try_send(packet).is_err() {
            // Full (a client too slow to read) or gone: the attach ends.
            tracing::warn!(attach = attach.id, "dropping an attach whose queue is full");
            self.detach(attach);
        }
    }

    /// Runs one command on an ephemeral lane; `None` when there is
    /// nothing to answer.
    async fn run_ephemeral(
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
            let documents =
                self.inner
                    .documents
                    .state(&thread.documents)
                    .map_err(|e| FrameViolation {
                        code: FinCode::ServerError,
                        message: e.to_string(),
                    })?;
            let (outcome, _) = self
                .execute_once(
                    &thread,
                    &attach.client,
                    attach.principal.clone(),
                    &command.protocol,
                    contract.unwrap_or(Contract {
                        wire: attach.selection.wire,
                        version: attach.selection.wire,
                    }),
                    &command.method,
                    &command.params,
                    Some(attach),
                    &documents.state,
                )
                .map_err(|e| FrameViolation {
                    code: FinCode::ServerError,
                    message: e.to_string(),
                })?;
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

    fn lane_lock(
        &self,
        thread: &Thread,
        client: &ClientId,
        protocol: &ProtocolName,
    ) -> Arc<tokio::sync::Mutex<bool>> {
        let mut lanes = lock(&thread.lanes);
        if lanes.len() >= MAX_LANE_LOCKS_PER_THREAD {
            lanes.retain(|_, l| Arc::strong_count(l) > 1);
        }
        lanes
            .entry((client.clone(), protocol.clone()))
            .or_insert_with(|| Arc::new(tokio::sync::Mutex::new(false)))
            .clone()
    }

    /// Finishes the lane's admitted-but-unanswered commands (left by a
    /// crash), without an attach, under their recorded contracts.
    async fn recover_lane(
        &self,
        thread: &Arc<Thread>,
        client: &ClientId,
        protocol: &ProtocolName,
        stream: &StreamKey,
    ) -> Result<(), HostError> {
        let lane_lock = self.lane_lock(thread, client, protocol);
        let mut recovered = lane_lock.lock().await;
        if *recovered {
            return Ok(());
        }
        self.finish_pending(thread, client, protocol, stream)
            .await?;
        *recovered = true;
        Ok(())
    }

    async fn finish_pending(
        &self,
        thread: &Arc<Thread>,
        client: &ClientId,
        protocol: &ProtocolName,
        stream: &StreamKey,
    ) -> Result<Vec<Answer>, HostError> {
        let lane = self.inner.lanes.state(stream)?;
        if lane.state.pending.is_empty() {
            return Ok(Vec::new());
        }
        let pending: Vec<(u64, PendingCommand)> = lane
            .state
            .pending
            .iter()
            .map(|(s, p)| (*s, p.clone()))
            .collect();
        self.execute_admitted(thread, client, protocol, stream, pending, None)
            .await
    }

    /// Admits, executes and answers a run of commands on a durable lane.
    async fn run_durable(
        &self,
        attach: &Arc<Attach>,
        protocol: &ProtocolName,
        run: Vec<Command>,
    ) -> Result<(), FrameViolation> {
        let server = |e: HostError| FrameViolation {
            code: FinCode::ServerError,
            message: e.to_string(),
        };
        let thread = attach.thread.clone();
        let stream =
            lane_stream(&thread.id, &attach.client, protocol).map_err(|e| server(e.into()))?;
        let lane_lock = self.lane_lock(&thread, &attach.client, protocol);
        let mut recovered = lane_lock.lock().await;
        if !*recovered {
            self.finish_pending(&thread, &attach.client, protocol, &stream)
                .await
                .map_err(server)?;
            *recovered = true;
        }
        let contract = attach
            .contract(protocol)
            .ok_or_else(|| FrameViolation::invalid("unselected"))?;
        let mut violation = None;
        for attempt in 0.. {
            let lane = self
                .inner
                .lanes
                .state(&stream)
                .map_err(|e| server(e.into()))?;
            let mut duplicates = Vec::new();
            let mut fresh = Vec::new();
            let mut next = lane.state.watermark + 1;
            for command in &run {
                if command.seq < next && fresh.is_empty() {
                    duplicates.push(match lane.state.answers.get(&command.seq) {
                        Some(retained) => retained_answer(protocol, command.seq, retained),
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
                        principal: attach.principal.clone(),
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
                Ok(_) => {}
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
                            principal: attach.principal.clone(),
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
            self.flush_attach(attach, answers, Vec::new());
            break;
        }
        drop(recovered);
        match violation {
            Some(v) => Err(v),
            None => Ok(()),
        }
    }

    /// Executes admitted commands in order, records their answers on the
    /// lane (one durable append) and returns them.
    async fn execute_admitted(
        &self,
        thread: &Arc<Thread>,
        client: &ClientId,
        protocol: &ProtocolName,
        stream: &StreamKey,
        pending: Vec<(u64, PendingCommand)>,
        attach: Option<&Arc<Attach>>,
    ) -> Result<Vec<Answer>, HostError> {
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
            let outcome = self
                .execute_durable(
                    thread,
                    client,
                    command.principal.clone(),
                    protocol,
                    seq,
                    contract,
                    &command.method,
                    &params,
                    attach,
                )
                .await?;
            let (ok, text) = outcome_json(&outcome);
            records.push(
                CommandAnswered {
                    seq,
                    ok,
                    answer: text,
                }
                .to_record(),
            );
            answers.push(answer(protocol, seq, outcome, Some(contract)));
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
    /// again: its recorded answer is returned.
    #[allow(clippy::too_many_arguments)]
    async fn execute_durable(
        &self,
        thread: &Arc<Thread>,
        client: &ClientId,
        principal: Option<String>,
        protocol: &ProtocolName,
        seq: u64,
        contract: Contract,
        method: &str,
        params: &[Value],
        attach: Option<&Arc<Attach>>,
    ) -> Result<Outcome, HostError> {
        let _exec = thread.exec.lock().await;
        for _ in 0..MAX_COMMIT_ATTEMPTS {
            let documents = self.inner.documents.state(&thread.documents)?;
            if let Some(applied) =
                documents
                    .state
                    .applied_answer(client.as_str(), protocol.as_str(), seq)
            {
                return Ok(outcome_from(applied.ok, &applied.answer.0));
            }
            let (outcome, changes) = self.execute_once(
                thread,
                client,
                principal.clone(),
                protocol,
                contract,
                method,
                params,
                attach,
                &documents.state,
            )?;
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
                    self.flush_thread(thread, attach.map(|a| a.id))?;
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

    /// Runs a handler once against `documents`; applies its attach
    /// changes on success and returns its outcome and durable changes.
    #[allow(clippy::too_many_arguments)]
    fn execute_once(
        &self,
        thread: &Arc<Thread>,
        client: &ClientId,
        principal: Option<String>,
        protocol: &ProtocolName,
        contract: Contract,
        method: &str,
        params: &[Value],
        attach: Option<&Arc<Attach>>,
        documents: &DocumentsState,
    ) -> Result<(Outcome, Vec<DocumentChange>), HostError> {
        let is_connected = lock(&thread.attaches).values().any(|a| &a.client == client);
        let (context, txn) = match attach {
            Some(attach) if !attach.is_closed() => {
                let state = lock(&attach.state);
                (
                    state.context.get(protocol).map(|(v, _)| v.clone()),
                    Some(AttachTxn {
                        thread: thread.id.clone(),
                        selection: attach.selection.clone(),
                        ephemeral: state.ephemeral.clone(),
                        included: state.included.clone(),
                    }),
                )
            }
            _ => (None, None),
        };
        let mut ctx = CommandContext {
            caller: Caller {
                client_id: client.clone(),
                auth: principal,
                is_connected,
            },
            thread: &thread.id,
            protocol,
            contract,
            context,
            host: &self.inner,
            documents,
            staged: BTreeMap::new(),
            attach: txn,
        };
        let outcome = match self
            .inner
            .handlers
            .get(&(protocol.clone(), method.to_owned()))
        {
            Some(handler) => handler(&mut ctx, params),
            None => Err(Rejection::new(
                "unknown-method",
                format!("{protocol} has no method {method}"),
            )),
        };
        if outcome.is_err() {
            return Ok((outcome, Vec::new()));
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
        Ok((outcome, changes))
    }

    /// The documents `attach` should see now.
    fn view(&self, attach: &Attach, state: &AttachState, documents: &DocumentsState) -> View {
        let mut view = View::new();
        for p in &attach.selection.protocols {
            match p.record {
                Record::Durable => {
                    let value = documents
                        .documents
                        .get(&(p.name.to_string(), None))
                        .map(|j| j.0.clone())
                        .or_else(|| {
                            self.inner
                                .protocols
                                .get(&p.name)
                                .map(|info| info.initial_main.clone())
                        });
                    if let Some(value) = value {
                        view.insert(DocIdentity::main(p.name.clone()), value);
                    }
                }
                Record::Ephemeral => {
                    for (id, value) in state
                        .ephemeral
                        .iter()
                        .filter(|(id, _)| id.protocol == p.name)
                    {
                        view.insert(id.clone(), value.clone());
                    }
                }
            }
        }
        for id in &state.included {
            if let Some(value) = documents
                .documents
                .get(&(id.protocol.to_string(), id.key.clone()))
            {
                view.insert(id.clone(), value.0.clone());
            }
        }
        view
    }

    /// Sends `attach` its view diff, then `answers`, in one packet.
    fn flush_attach(&self, attach: &Arc<Attach>, answers: Vec<Answer>, dur: Vec<Dur>) {
        let documents = match self.inner.documents.state(&attach.thread.documents) {
            Ok(documents) => documents,
            Err(error) => {
                self.end(attach, server_fin(error));
                return;
            }
        };
        self.flush_with(attach, &documents.state, answers, dur);
    }

    fn flush_with(
        &self,
        attach: &Arc<Attach>,
        documents: &DocumentsState,
        ans: Vec<Answer>,
        dur: Vec<Dur>,
    ) {
        let mut state = lock(&attach.state);
        let view = self.view(attach, &state, documents);
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

    /// Flushes every attach of the thread (after a document commit) but
    /// `except`, which its caller flushes with its answers.
    fn flush_thread(&self, thread: &Arc<Thread>, except: Option<u64>) -> Result<(), HostError> {
        let documents = self.inner.documents.state(&thread.documents)?;
        let attaches: Vec<Arc<Attach>> = lock(&thread.attaches)
            .values()
            .filter(|a| Some(a.id) != except)
            .cloned()
            .collect();
        for attach in attaches {
            self.flush_with(&attach, &documents.state, Vec::new(), Vec::new());
        }
        Ok(())
    }

    /// Changes durable documents outside any command (application start,
    /// background work) and flushes every attach of the thread.
    pub async fn commit_documents(
        &self,
        thread: &str,
        changes: Vec<(String, Option<Vec<String>>, Option<Value>)>,
    ) -> Result<(), HostError> {
        let thread_id =
            ThreadId::new(thread).map_err(|e| HostError::Registration(e.to_string()))?;
        let thread = self
            .thread(&thread_id)
            .map_err(|fin| HostError::Registration(fin.message))?;
        let _exec = thread.exec.lock().await;
        let changes = changes
            .into_iter()
            .map(|(protocol, key, value)| DocumentChange {
                protocol,
                key: key.map(|k| resolve_key(&thread.id, k)),
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
        self.flush_thread(&thread, None)
    }

    /// A durable lane's folded state (tests, tools).
    pub fn lane_state(
        &self,
        thread: &ThreadId,
        client: &ClientId,
        protocol: &ProtocolName,
    ) -> Result<LaneState, HostError> {
        let stream = lane_stream(thread, client, protocol)?;
        Ok(self.inner.lanes.state(&stream)?.state.clone())
    }

    /// Number of live attaches on a thread.
    pub fn attach_count(&self, thread: &ThreadId) -> usize {
        lock(&self.inner.threads)
            .get(thread)
            .map_or(0, |t| lock(&t.attaches).len())
    }
}

fn retained_answer(
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
    answer(
        protocol,
        seq,
        outcome_from(retained.ok, &retained.answer.0),
        contract,
    )
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
