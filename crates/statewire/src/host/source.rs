//! Extension points for an application whose state lives in its own
//! ledger streams rather than in the host's documents stream: a
//! [`DocumentSource`] derives a protocol's documents from such a stream,
//! and an [`AsyncHandler`] runs a durable command that writes to it. A
//! [`Call`] names the command and its [`Caller`] (whom every handler,
//! sync ones too, is told about).
//!
//! The host still owns admission, sequence numbers, retained answers,
//! views and flushes; it follows a source's stream while the thread has
//! attaches, so every attach sees the documents change as records land,
//! whoever appended them.
//! Must never: let a source's documents be written through a command's
//! staged changes (they are derived, never stored), or run an async
//! handler before its command's admission is durable.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use futures_util::future::BoxFuture;
use serde_json::Value;

use crate::ids::{ClientId, PrincipalId, ProtocolName, ThreadScope};
use crate::packet::{Contract, Rejection};
use crate::view::DocIdentity;
use ledgerwire_ledger::StreamKey;

/// Documents of one durable protocol, derived from a ledger stream.
#[async_trait]
pub trait DocumentSource: Send + Sync + 'static {
    /// The stream whose appends change `thread`'s documents.
    fn stream(&self, thread: &ThreadScope) -> Result<StreamKey, String>;

    /// `thread`'s documents as the stream stands now.
    async fn snapshot(&self, thread: &ThreadScope) -> Result<Arc<dyn SourceSnapshot>, String>;

    /// The host stopped following `thread` (its last attach ended): what
    /// the source caches for it may go.
    fn release(&self, _thread: &ThreadScope) {}
}

/// A source's documents at one moment, shared by every attach a flush
/// serves. Views are built under the attaches' locks, so everything
/// [`SourceSnapshot::keyed`] returns must be in memory by then: before a
/// flush builds them, the host asks what each attach would need that the
/// snapshot has not read ([`SourceSnapshot::wanted`]) and has it read
/// ([`SourceSnapshot::read_wanted`]), off every lock.
#[async_trait]
pub trait SourceSnapshot: Send + Sync {
    /// The protocol's main document.
    fn main(&self) -> Arc<Value>;

    /// Parts of the source `keyed` would read for this attach and the
    /// snapshot does not hold yet, as numbers the source chooses (for
    /// `harness-sdk`, older turns).
    fn wanted(&self, _attach: &AttachDocuments<'_>) -> Vec<u64> {
        Vec::new()
    }

    /// Reads the parts `wanted` named, so `keyed` finds them.
    async fn read_wanted(&self, _wanted: Vec<u64>) {}

    /// The keyed documents (absolute keys) this attach sees, chosen from
    /// what it holds (its interests, for example).
    fn keyed(&self, attach: &AttachDocuments<'_>) -> Vec<(Vec<String>, Arc<Value>)>;
}

/// What a source may read of an attach: its ephemeral documents.
pub struct AttachDocuments<'a> {
    pub(super) ephemeral: &'a BTreeMap<DocIdentity, Value>,
}

impl<'a> AttachDocuments<'a> {
    /// An attach holding `ephemeral` (none: what a view for nobody in
    /// particular sees).
    pub fn new(ephemeral: &'a BTreeMap<DocIdentity, Value>) -> Self {
        Self { ephemeral }
    }
}

impl AttachDocuments<'_> {
    /// The attach's main document of an ephemeral protocol (full name).
    pub fn main(&self, protocol: &str) -> Option<&Value> {
        self.ephemeral
            .iter()
            .find(|(id, _)| id.main && id.protocol.as_str() == protocol)
            .map(|(_, value)| value)
    }
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

/// A durable command as an async handler receives it.
#[derive(Debug, Clone)]
pub struct Call {
    pub caller: Caller,
    pub thread: ThreadScope,
    pub protocol: ProtocolName,
    pub seq: u64,
    pub method: String,
    pub params: Vec<Value>,
    /// The contract the command was admitted under.
    pub contract: Contract,
    /// The host finishes this command after a restart: there is no
    /// admitting attach, and an earlier run may have applied it already.
    pub recovering: bool,
}

impl Call {
    /// The command's identity (client, protocol, seq) as one string: an
    /// async handler applies each key at most once, so a command the host
    /// runs again after a crash answers what its first run did.
    pub fn key(&self) -> String {
        format!("{}/{}/{}", self.caller.client_id, self.protocol, self.seq)
    }
}

/// Runs a durable command against the application's own streams. It must
/// be idempotent on [`Call::key`].
pub type AsyncHandler =
    Arc<dyn Fn(Call) -> BoxFuture<'static, Result<Value, Rejection>> + Send + Sync>;
