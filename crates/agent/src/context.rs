//! What an agent may read to run one segment of a turn.
//!
//! Owns: [`TurnContext`] and [`AnsweredPause`]. Must never: hold a handle
//! to the ledger, a clock or the network: an agent is deterministic in its
//! context, so everything it reads is in here.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::exchange::ModelExchange;
use crate::history::{PastTurn, Recall};
use ledgerwire_wire::composition::{CompositionManifest, StreamedComponent};
use ledgerwire_wire::frame::Frame;
use ledgerwire_wire::request::{InterruptResponse, TurnRequest};

/// An answered pause: the frame that asked and the accepted answer.
#[derive(Clone, Debug)]
pub struct AnsweredPause {
    pub frame: Frame,
    pub response: InterruptResponse,
}

/// Everything an agent may read to run one segment of a turn.
#[derive(Clone, Debug)]
pub struct TurnContext {
    /// Turn number in the conversation (1, 2, …).
    pub turn: u32,
    pub request: TurnRequest,
    /// This turn's answered pauses, oldest first; the last one is what this
    /// segment resumes from (none on the turn's first segment).
    pub answers: Vec<AnsweredPause>,
    /// The canvas as it stands.
    pub canvas: Option<Arc<CompositionManifest>>,
    /// Components the conversation streamed, by id.
    pub components: Arc<BTreeMap<String, StreamedComponent>>,
    /// The conversation digest: earlier turns, newest first, bounded by
    /// [`DIGEST_TURNS`](crate::history::DIGEST_TURNS) and
    /// [`DIGEST_MAX_BYTES`](crate::history::DIGEST_MAX_BYTES).
    pub history: Vec<PastTurn>,
    /// The recall tool, for what lies past the digest.
    pub recall: Recall,
    /// An earlier segment already started from this same answer and died
    /// before it ended (the client re-posted the answer after a crash or a
    /// lost stream). Only scripted faults read it: they play once.
    pub retried: bool,
    /// Model exchanges recorded for this point of the turn (the same
    /// answered pauses): completed calls of earlier tries of this segment,
    /// which a retried segment reuses instead of asking again, and, in a
    /// replay, the segment's own calls.
    pub exchanges: Arc<Vec<ModelExchange>>,
}
