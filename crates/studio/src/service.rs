//! The Studio service: the handle every Studio request goes through, over
//! the conversations' fold cache, the agent, the settings and the
//! server's shutdown phase.
//!
//! Owns: [`Studio`] (cheap to clone, one per server), the fold cache and
//! its bounds, naming a conversation's stream and folding it.
//! Must never: keep conversation state outside the fold cache, or decide
//! anything itself: decisions go through `decide` (`start`, `cancel`,
//! `mutation`), and a started segment streams in `segment`.

use std::sync::Arc;

use ledgerwire_agent::Agent;
use ledgerwire_foundations::lifecycle::Lifecycle;
use ledgerwire_ledger::{FoldCache, Folded, Ledger, StreamKey};
use ledgerwire_wire::WireError;
use ledgerwire_wire::ids::ConversationId;

use super::auth::Principal;
use super::config::StudioConfig;
use super::conversation::{Conversation, ConversationFold};
use super::records::conversation_stream;
use super::refusals::{draining, refusal};

/// Conversations whose folded state stays in memory.
pub const CACHED_CONVERSATIONS: usize = 10_000;
/// Distance, in records, between two snapshots of one conversation's
/// fold. The first request to a conversation after a restart folds at
/// most this many records past its snapshot: about 4 µs each (a frame's
/// head is parsed), against about 2 µs per KiB of state to decode the
/// snapshot (500 planned turns: 0.6 MB, 1.3 ms) and as much to write one
/// (so a long conversation pays about 10 µs per record in snapshots). A
/// conversation shorter than this is folded from its records alone.
pub const CONVERSATION_SNAPSHOT_INTERVAL_RECORDS: u64 = 128;

/// The Studio service; cheap to clone, one per server.
#[derive(Clone)]
pub struct Studio {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub(super) ledger: Ledger,
    pub(super) folds: FoldCache<ConversationFold>,
    pub(super) agent: Arc<dyn Agent>,
    pub(super) config: StudioConfig,
    /// The server's shutdown phase: segments are counted in it, follow it
    /// (a cut stops them), and no turn or resume starts once it drains.
    pub(super) lifecycle: Lifecycle,
}

impl Studio {
    pub fn new(ledger: Ledger, agent: Arc<dyn Agent>, config: StudioConfig) -> Self {
        Self::with_lifecycle(ledger, agent, config, Lifecycle::default())
    }

    /// A Studio following the server's shutdown phases.
    pub fn with_lifecycle(
        ledger: Ledger,
        agent: Arc<dyn Agent>,
        config: StudioConfig,
        lifecycle: Lifecycle,
    ) -> Self {
        let folds = FoldCache::with_limits(
            ledger.clone(),
            CONVERSATION_SNAPSHOT_INTERVAL_RECORDS,
            CACHED_CONVERSATIONS,
        );
        Self {
            inner: Arc::new(Inner {
                ledger,
                folds,
                agent,
                config,
                lifecycle,
            }),
        }
    }

    /// Refuses a request that would start a segment while the server
    /// shuts down: the client retries on the restarted server.
    pub(super) fn refuse_while_draining(&self) -> Result<(), WireError> {
        if self.inner.lifecycle.is_draining() {
            return Err(draining());
        }
        Ok(())
    }

    pub fn config(&self) -> &StudioConfig {
        &self.inner.config
    }

    pub fn ledger(&self) -> &Ledger {
        &self.inner.ledger
    }

    /// The stream of `principal`'s `conversation`, or the refusal of an id
    /// that cannot name one.
    pub(super) fn stream(
        principal: &Principal,
        conversation: &ConversationId,
    ) -> Result<StreamKey, WireError> {
        conversation_stream(principal, conversation).map_err(|_| {
            WireError::binding_invalid(
                "/conversation_id",
                "The conversation id cannot name a conversation.",
                "use a shorter conversation id of printable characters",
            )
        })
    }

    /// The conversation of `stream`, folded to the stream's end.
    pub(super) async fn fold(
        &self,
        stream: &StreamKey,
    ) -> Result<Arc<Folded<Conversation>>, WireError> {
        self.inner
            .folds
            .state(stream)
            .await
            .map_err(|error| refusal(&error))
    }

    /// The folded conversation (for replay and reconnects).
    pub async fn conversation(
        &self,
        principal: &Principal,
        conversation: &ConversationId,
    ) -> Result<Arc<Folded<Conversation>>, WireError> {
        self.fold(&Self::stream(principal, conversation)?).await
    }
}
