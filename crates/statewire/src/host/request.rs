//! What a transport asks [`Host::attach`](super::Host::attach) for, read
//! into typed fields: the thread, the authenticated principal, the client,
//! the selection, the attacher and the results cursor. Pure but for the
//! application's authenticator.
//!
//! Owns: validating an attach's request fields in the order the protocol
//! checks them (authentication first). Must never: negotiate before
//! authenticating, or accept a field the selected wire version does not
//! have.

use std::collections::BTreeMap;

use crate::ids::{AttacherId, ClientId, PrincipalId, ProtocolName, ThreadId};
use crate::negotiation::{self, NegotiationError, Selection};
use crate::packet::{Fin, FinCode, Frame};

use super::registry::{Registry, WIRE_NAMED_ATTACHER, WIRE_RESULTS_CURSOR};

/// What a transport passes to [`Host::attach`](super::Host::attach).
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

/// An attach request's fields, validated.
pub(super) struct Negotiated {
    pub(super) thread: ThreadId,
    pub(super) principal: Option<PrincipalId>,
    pub(super) client: ClientId,
    pub(super) selection: Selection,
    pub(super) attacher: Option<AttacherId>,
    /// Per lane, the highest seq whose answer the client holds.
    pub(super) cursor: BTreeMap<ProtocolName, u64>,
}

fn invalid(message: String) -> Fin {
    Fin::new(FinCode::InvalidNegotiation, message)
}

impl AttachRequest {
    /// The request's thread id.
    pub(super) fn thread_id(&self) -> Result<ThreadId, Fin> {
        ThreadId::new(self.thread.as_str()).map_err(|e| invalid(e.to_string()))
    }

    /// Authenticates, then negotiates: the selection an attach with
    /// these fields would get.
    pub(super) fn select(&self, registry: &Registry) -> Result<Selection, Fin> {
        let thread = self.thread_id()?;
        registry.authenticate(&thread, self.authorization.as_deref())?;
        registry.negotiate(self.version.as_deref(), self.protocol.as_deref())
    }

    /// Authenticates and reads every field; every failure is a `fin`.
    pub(super) fn negotiate(&self, registry: &Registry) -> Result<Negotiated, Fin> {
        let thread = self.thread_id()?;
        let principal = registry.authenticate(&thread, self.authorization.as_deref())?;
        let client = match &self.client {
            Some(text) => ClientId::new(text.as_str()).map_err(|e| invalid(e.to_string()))?,
            None => ClientId::mint(),
        };
        let selection = registry.negotiate(self.version.as_deref(), self.protocol.as_deref())?;
        let attacher = match &self.attacher {
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
        let cursor = match &self.cursor {
            Some(text) if selection.wire >= WIRE_RESULTS_CURSOR => {
                negotiation::read_cursor_field(text).map_err(|e| match e {
                    NegotiationError::Invalid(m) => invalid(m),
                    other => invalid(other.to_string()),
                })?
            }
            _ => BTreeMap::new(),
        };
        Ok(Negotiated {
            thread,
            principal,
            client,
            selection,
            attacher,
            cursor,
        })
    }
}
