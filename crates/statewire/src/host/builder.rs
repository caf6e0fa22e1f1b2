//! Registration: protocol definitions and the builder that validates
//! them into a [`Host`].
//!
//! Owns: the rules a protocol definition must meet. Must never: start a
//! host whose definitions contradict each other (refused at build).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::Value;

use crate::ids::{PrincipalId, ProtocolName, ThreadId};
use crate::negotiation::{ProtocolSupport, Record, SubprotocolSupport, Support};
use crate::packet::Rejection;
use crate::version::{Version, VersionRange};
use ledgerwire_foundations::lifecycle::Lifecycle;
use ledgerwire_ledger::Ledger;

use super::Host;
use super::adapters::{self, Adapter};
use super::context::{CommandContext, DocumentCheck, synced_patch, synced_set};
use super::failure::HostError;
use super::protocols::{ProtocolInfo, Protocols};
use super::queue::QueueLimits;
use super::registry::{
    Authenticator, ContextChange, ContextListener, ContextValidator, HandlerKind, Registry,
    WIRE_MAX, WIRE_MIN,
};
use super::source::{AsyncHandler, DocumentSource};

/// A protocol registration.
#[derive(Clone, Debug)]
pub struct ProtocolDef {
    name: String,
    version: Version,
    min_version: Version,
    subprotocols: Vec<(String, Record)>,
    requires: Vec<(String, Version, Version)>,
    initial_main: Value,
    adapters: Vec<Adapter>,
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
            adapters: Vec::new(),
        }
    }

    /// Oldest version served. Versions before the first breaking
    /// transition need an adapter chain starting here.
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

    /// An adapter at a breaking transition; register them oldest first.
    pub fn adapter(mut self, adapter: Adapter) -> Self {
        self.adapters.push(adapter);
        self
    }
}

/// Collects registrations; [`HostBuilder::build`] validates them.
pub struct HostBuilder {
    wire: (Version, Version),
    protocols: Vec<ProtocolDef>,
    handlers: Vec<(String, String, HandlerKind)>,
    sources: Vec<(String, Arc<dyn DocumentSource>)>,
    validators: Vec<(String, ContextValidator)>,
    listeners: Vec<(String, ContextListener)>,
    synced: Vec<String>,
    authenticator: Option<Authenticator>,
    queue: QueueLimits,
    compositions: Vec<Vec<String>>,
    lifecycle: Lifecycle,
}

impl Default for HostBuilder {
    fn default() -> Self {
        Self {
            wire: (WIRE_MIN, WIRE_MAX),
            protocols: Vec::new(),
            handlers: Vec::new(),
            sources: Vec::new(),
            validators: Vec::new(),
            listeners: Vec::new(),
            synced: Vec::new(),
            authenticator: None,
            queue: QueueLimits::default(),
            compositions: Vec::new(),
            lifecycle: Lifecycle::default(),
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
        self.handlers.push((
            protocol.to_owned(),
            method.to_owned(),
            HandlerKind::Sync(Arc::new(handler)),
        ));
        self
    }

    /// Routes `method` on a durable `protocol` to an async handler, for
    /// commands whose effects are records of the application's own
    /// streams (see [`DocumentSource`]). The handler must be idempotent on
    /// [`Call::key`].
    pub fn async_command(mut self, protocol: &str, method: &str, handler: AsyncHandler) -> Self {
        self.handlers.push((
            protocol.to_owned(),
            method.to_owned(),
            HandlerKind::Async(handler),
        ));
        self
    }

    /// Derives a durable parent protocol's documents from `source`
    /// instead of the host's documents stream.
    pub fn source(mut self, protocol: &str, source: Arc<dyn DocumentSource>) -> Self {
        self.sources.push((protocol.to_owned(), source));
        self
    }

    /// Installs `set` and `patch` on an ephemeral subprotocol's main
    /// document: a client-owned synced document.
    pub fn synced_document(self, protocol: &str) -> Self {
        self.synced_document_checked(protocol, |_| Ok(()))
    }

    /// Like [`HostBuilder::synced_document`], with `check` run on every
    /// value the document would take; a refusal (`invalid-document`, with
    /// its sentence) leaves the document as it was.
    pub fn synced_document_checked(
        mut self,
        protocol: &str,
        check: impl Fn(&Value) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.synced.push(protocol.to_owned());
        let check: DocumentCheck = Arc::new(check);
        let on_patch = check.clone();
        self.command(protocol, "set", move |ctx, params| {
            synced_set(ctx, params, &check)
        })
        .command(protocol, "patch", move |ctx, params| {
            synced_patch(ctx, params, &on_patch)
        })
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
        authenticate: impl Fn(&ThreadId, Option<&str>) -> Result<PrincipalId, String>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.authenticator = Some(Arc::new(authenticate));
        self
    }

    /// Orders protocols whose adapters transform the same documents (an
    /// adapter's `also_transforms`): their projections run in this order.
    pub fn composition(mut self, protocols: &[&str]) -> Self {
        self.compositions
            .push(protocols.iter().map(|p| (*p).to_owned()).collect());
        self
    }

    /// How much one attach may have queued before it is dropped as too
    /// slow (defaults: [`MAX_QUEUED_PACKETS`], [`MAX_QUEUED_BYTES`]).
    pub fn attach_queue(mut self, limits: QueueLimits) -> Self {
        self.queue = limits;
        self
    }

    /// The server's shutdown phases: attaches are counted in it, and none
    /// starts once it drains (default: a lifecycle of the host's own).
    pub fn lifecycle(mut self, lifecycle: Lifecycle) -> Self {
        self.lifecycle = lifecycle;
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
            adapters::check_chain(name.as_str(), def.min_version, def.version, &def.adapters)
                .map_err(bad)?;
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
                        source: None,
                        native: def.version,
                        adapters: Vec::new(),
                        group: None,
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
                        source: None,
                        native: def.version,
                        adapters: def.adapters.clone(),
                        group: None,
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
        compose(&mut protocols, &self.compositions).map_err(bad)?;
        for p in &support.protocols {
            for (dep, _) in &p.requires {
                if !support.protocols.iter().any(|q| &q.name == dep) {
                    return Err(bad(format!("{} requires unregistered {dep}", p.name)));
                }
            }
        }
        for (protocol, source) in self.sources {
            let name = ProtocolName::new(protocol.as_str()).map_err(|e| bad(e.to_string()))?;
            let Some(info) = protocols.get_mut(&name) else {
                return Err(bad(format!("{name} is not registered")));
            };
            if name.parent().is_some() || info.record != Record::Durable {
                return Err(bad(format!(
                    "{protocol}: only a durable parent protocol can have a document source"
                )));
            }
            if info.source.replace(source).is_some() {
                return Err(bad(format!("{protocol} has two document sources")));
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
            let durable = protocols.get(&name).map(|p| p.record) == Some(Record::Durable);
            if matches!(handler, HandlerKind::Async(_)) && !durable {
                return Err(bad(format!(
                    "{protocol}.{method}: async handlers serve durable lanes only"
                )));
            }
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
        let registry = Registry {
            support,
            protocols: Protocols::new(protocols),
            handlers,
            validators,
            listeners,
            authenticator: self.authenticator,
        };
        Ok(Host::new(ledger, registry, self.queue, self.lifecycle))
    }
}

/// Checks the compositions against what the adapters transform, and gives
/// each composed protocol its group (the composition's members in order).
fn compose(
    protocols: &mut BTreeMap<ProtocolName, ProtocolInfo>,
    compositions: &[Vec<String>],
) -> Result<(), String> {
    let registered: BTreeSet<String> = protocols
        .keys()
        .filter(|name| name.parent().is_none())
        .map(ToString::to_string)
        .collect();
    let mut transforms: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (name, info) in protocols.iter() {
        for adapter in &info.adapters {
            let targets = transforms.entry(name.to_string()).or_default();
            targets.insert(name.to_string());
            for other in &adapter.also_transforms {
                if !registered.contains(other) {
                    return Err(format!(
                        "{name}: an adapter transforms {other}, which is not a registered protocol"
                    ));
                }
                targets.insert(other.clone());
            }
        }
    }
    adapters::check_compositions(&transforms, compositions, &registered)?;
    for composition in compositions {
        let group: Arc<[ProtocolName]> = composition
            .iter()
            .filter_map(|p| ProtocolName::new(p.as_str()).ok())
            .collect();
        for member in group.iter() {
            if let Some(info) = protocols.get_mut(member) {
                info.group = Some(group.clone());
            }
        }
    }
    Ok(())
}
