//! The registered protocols, parents and children by full name, each
//! with its record, initial main document, document source, native
//! version, adapters and composition: what a command handler may read of
//! the registrations (see `context`). Pure: no I/O, and nothing changes
//! after the build.
//!
//! Owns: [`Protocols`] and the lookups over it. Must never: change after
//! the host is built.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::ids::ProtocolName;
use crate::negotiation::Record;
use crate::version::Version;

use super::adapters::Adapter;
use super::source::DocumentSource;

/// One registered protocol (a parent or a child).
pub(super) struct ProtocolInfo {
    pub(super) record: Record,
    pub(super) initial_main: Value,
    /// Where a derived protocol's documents come from.
    pub(super) source: Option<Arc<dyn DocumentSource>>,
    /// The native version (a child's is its parent's).
    pub(super) native: Version,
    /// Breaking transitions, oldest first (a child has none: its parent's
    /// convert it).
    pub(super) adapters: Vec<Adapter>,
    /// The composition the protocol's projections run in, if any.
    pub(super) group: Option<Arc<[ProtocolName]>>,
}

/// Every registered protocol by full name.
pub(super) struct Protocols(BTreeMap<ProtocolName, ProtocolInfo>);

impl Protocols {
    pub(super) fn new(protocols: BTreeMap<ProtocolName, ProtocolInfo>) -> Self {
        Self(protocols)
    }

    pub(super) fn info(&self, protocol: &ProtocolName) -> Option<&ProtocolInfo> {
        self.0.get(protocol)
    }

    /// Every protocol, parents and children, by full name.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&ProtocolName, &ProtocolInfo)> {
        self.0.iter()
    }

    /// The source a derived protocol's documents come from.
    pub(super) fn source_of(&self, protocol: &ProtocolName) -> Option<&Arc<dyn DocumentSource>> {
        self.info(protocol).and_then(|info| info.source.as_ref())
    }

    /// A protocol's adapters, oldest first (none for a child).
    pub(super) fn adapters_of(&self, protocol: &ProtocolName) -> &[Adapter] {
        self.info(protocol)
            .map_or(&[], |info| info.adapters.as_slice())
    }
}
