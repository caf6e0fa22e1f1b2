//! The registry: what the builder validated, read by every other part of
//! the host. Which protocols exist (see `protocols`), which handler
//! serves each method, who validates and who hears a context, and who
//! authenticates. Pure: no I/O, and nothing changes after the build.
//!
//! Owns: lookups over the registrations, authentication, negotiation
//! against what is served, discovery, and context checks.
//! Must never: disclose the supported ranges before authentication, or
//! change after the host is built.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use crate::ids::{ClientId, PrincipalId, ProtocolName, ThreadId, ThreadScope};
use crate::negotiation::{self, Selection, Support};
use crate::packet::{CtxEntry, Fin, FinCode, FrameViolation, Rejection};
use crate::version::Version;

use super::adapters::{self, Adapter, CommandInfo};
use super::context::CommandContext;
use super::protocols::{ProtocolInfo, Protocols};
use super::source::{AsyncHandler, DocumentSource};

/// Oldest wire version this host serves.
pub const WIRE_MIN: Version = Version::ymd(2026, 9, 30);
/// Native wire version.
pub const WIRE_MAX: Version = Version::ymd(2026, 11, 2);
/// First wire version with the attach results cursor.
pub const WIRE_RESULTS_CURSOR: Version = Version::ymd(2026, 11, 1);
/// First wire version where every attach names its attacher.
pub const WIRE_NAMED_ATTACHER: Version = Version::ymd(2026, 11, 2);

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

/// A registered command handler.
#[derive(Clone)]
pub(super) enum HandlerKind {
    /// Runs against the host's documents, which it may change.
    Sync(Handler),
    /// Runs against the application's own streams.
    Async(AsyncHandler),
}

/// Every registration, validated (see `builder`).
pub(super) struct Registry {
    pub(super) support: Support,
    /// Every protocol by full name (parents and children).
    pub(super) protocols: Protocols,
    pub(super) handlers: HashMap<(ProtocolName, String), HandlerKind>,
    pub(super) validators: HashMap<ProtocolName, ContextValidator>,
    pub(super) listeners: HashMap<ProtocolName, Vec<ContextListener>>,
    pub(super) authenticator: Option<Authenticator>,
}

impl Registry {
    /// What this host serves (wire range and protocols).
    pub(super) fn support(&self) -> &Support {
        &self.support
    }

    /// Runs the authenticator. A refusal discloses nothing but the
    /// authenticator's sentence.
    pub(super) fn authenticate(
        &self,
        thread: &ThreadId,
        authorization: Option<&str>,
    ) -> Result<Option<PrincipalId>, Fin> {
        match &self.authenticator {
            None => Ok(None),
            Some(authenticate) => authenticate(thread, authorization)
                .map(Some)
                .map_err(|message| Fin::new(FinCode::Unauthorized, message)),
        }
    }

    /// The selection the offer in these negotiation fields gets.
    pub(super) fn negotiate(
        &self,
        version: Option<&str>,
        protocol: Option<&str>,
    ) -> Result<Selection, Fin> {
        let support = &self.support;
        let offer = negotiation::read_offer(version, protocol)
            .map_err(|e| Fin::negotiation(&e, support))?;
        negotiation::negotiate(support, &offer).map_err(|e| Fin::negotiation(&e, support))
    }

    pub(super) fn info(&self, protocol: &ProtocolName) -> Option<&ProtocolInfo> {
        self.protocols.info(protocol)
    }

    /// The source a derived protocol's documents come from.
    pub(super) fn source_of(&self, protocol: &ProtocolName) -> Option<&Arc<dyn DocumentSource>> {
        self.protocols.source_of(protocol)
    }

    /// A protocol's adapters, oldest first (none for a child).
    pub(super) fn adapters_of(&self, protocol: &ProtocolName) -> &[Adapter] {
        self.protocols.adapters_of(protocol)
    }

    /// A protocol's native version.
    pub(super) fn native_of(&self, protocol: &ProtocolName) -> Version {
        self.info(protocol).map_or(WIRE_MIN, |info| info.native)
    }

    /// The handler `method` on `protocol` runs.
    pub(super) fn handler(&self, protocol: &ProtocolName, method: &str) -> Option<&HandlerKind> {
        self.handlers.get(&(protocol.clone(), method.to_owned()))
    }

    /// The commands an attach with `selection` may send, per selected
    /// protocol, as its contract names them (discovery).
    pub(super) fn commands(&self, selection: &Selection) -> Vec<ProtocolCommands> {
        selection
            .protocols
            .iter()
            .map(|selected| {
                let mut native: Vec<CommandInfo> = self
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

    /// Checks a context entry against the selection and its protocol's
    /// validator.
    pub(super) fn check_context(
        &self,
        selection: &Selection,
        entry: &CtxEntry,
    ) -> Result<(), FrameViolation> {
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
        if let Some(validate) = self.validators.get(&entry.protocol) {
            validate(&entry.value, entry.meta.as_ref())
                .map_err(|m| violation(format!("{}: {m}", entry.protocol)))?;
        }
        Ok(())
    }

    /// Who hears a context replacement on `protocol` (none: nobody asked).
    pub(super) fn listeners(&self, protocol: &ProtocolName) -> &[ContextListener] {
        self.listeners.get(protocol).map_or(&[], Vec::as_slice)
    }
}
