//! What a command handler sees: its caller, its protocol's documents
//! (staged until the command succeeds) and the admitting attach.
//!
//! Owns: the handler's view of one command, and the bounds on what one
//! command may change. Must never: let a handler's changes be seen before
//! its command succeeds.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value;

use crate::ids::{ProtocolName, ThreadId, ThreadScope};
use crate::negotiation::{Record, Selection};
use crate::packet::{Contract, Rejection};
use crate::records::DocumentsState;
use crate::statepatch;
use crate::view::DocIdentity;

use super::protocols::Protocols;
use super::source::Caller;

/// Largest encoded document value (ephemeral or durable), in bytes.
pub const MAX_DOCUMENT_BYTES: usize = 64 * 1024;
/// Most documents one command may change.
pub const MAX_CHANGES_PER_COMMAND: usize = 8;
/// Most ephemeral documents one attach may hold.
pub const MAX_EPHEMERAL_DOCUMENTS: usize = 64;
/// Most keyed documents one attach may include.
pub const MAX_INCLUDED_DOCUMENTS: usize = 256;

/// Replaces a leading `"."` with the thread's canonical prefix: its id.
pub fn resolve_key(thread: &ThreadId, key: Vec<String>) -> Vec<String> {
    match key.split_first() {
        Some((first, rest)) if first == "." => std::iter::once(thread.to_string())
            .chain(rest.iter().cloned())
            .collect(),
        _ => key,
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

/// The handler's view of one command.
pub struct CommandContext<'a> {
    pub(super) caller: Caller,
    pub(super) thread: &'a ThreadScope,
    pub(super) protocol: &'a ProtocolName,
    pub(super) contract: Contract,
    pub(super) context: Option<Value>,
    pub(super) protocols: &'a Protocols,
    pub(super) documents: &'a DocumentsState,
    pub(super) staged: BTreeMap<(ProtocolName, Option<Vec<String>>), Option<Value>>,
    pub(super) attach: Option<AttachTxn>,
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

impl CommandContext<'_> {
    pub fn caller(&self) -> &Caller {
        &self.caller
    }

    pub fn thread(&self) -> &ThreadId {
        self.thread.id()
    }

    /// The thread with the principal it belongs to.
    pub fn scope(&self) -> &ThreadScope {
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
        if self.protocols.info(&name).is_none() {
            return Err(Rejection::new("unknown-protocol", format!("{name}")));
        }
        Ok(name)
    }

    /// A durable protocol's main document (staged changes included).
    pub fn main(&self, protocol: &str) -> Option<Value> {
        let name = self.protocol_name(protocol).ok()?;
        self.read(&name, None).or_else(|| {
            self.protocols
                .info(&name)
                .filter(|p| p.record == Record::Durable)
                .map(|p| p.initial_main.clone())
        })
    }

    /// A durable keyed document (relative keys resolve to the thread).
    pub fn document(&self, protocol: &str, key: Vec<String>) -> Option<Value> {
        let name = self.protocol_name(protocol).ok()?;
        self.read(&name, Some(resolve_key(self.thread.id(), key)))
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
        let key = resolve_key(self.thread.id(), key);
        self.stage(name, Some(key), value)
    }

    fn stage(
        &mut self,
        name: ProtocolName,
        key: Option<Vec<String>>,
        value: Option<Value>,
    ) -> Result<(), Rejection> {
        let info = self.protocols.info(&name);
        if info.map(|p| p.record) != Some(Record::Durable) {
            return Err(Rejection::new(
                "not-durable",
                format!("{name} documents belong to attaches"),
            ));
        }
        if info.is_some_and(|p| p.source.is_some()) {
            return Err(Rejection::new(
                "derived-documents",
                format!("{name} documents are derived from the application's records"),
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
    pub(super) thread: ThreadId,
    pub(super) selection: Selection,
    pub(super) ephemeral: BTreeMap<DocIdentity, Value>,
    pub(super) included: BTreeSet<DocIdentity>,
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

/// Checks a value a synced document would take.
pub(super) type DocumentCheck = Arc<dyn Fn(&Value) -> Result<(), String> + Send + Sync>;

fn checked(check: &DocumentCheck, value: &Value) -> Result<(), Rejection> {
    check(value).map_err(|message| Rejection::new("invalid-document", message))
}

/// `set [value]` on a synced document.
pub(super) fn synced_set(
    ctx: &mut CommandContext<'_>,
    params: &[Value],
    check: &DocumentCheck,
) -> Result<Value, Rejection> {
    let [value] = params else {
        return Err(Rejection::new("invalid-params", "set takes [value]"));
    };
    checked(check, value)?;
    let protocol = ctx.protocol().to_string();
    let attach = ctx.attach()?;
    attach.mount(&protocol, value.clone(), None, true)?;
    Ok(Value::Null)
}

/// `patch [ops]` on a synced document.
pub(super) fn synced_patch(
    ctx: &mut CommandContext<'_>,
    params: &[Value],
    check: &DocumentCheck,
) -> Result<Value, Rejection> {
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
    checked(check, &document)?;
    attach.mount(&protocol, document, None, true)?;
    Ok(Value::Null)
}
