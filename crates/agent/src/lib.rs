//! The agent behind the Studio: what a turn says and computes.
//!
//! Owns: the [`Agent`] trait the Studio server drives, one segment at a
//! time (`driver`), what an agent reads (`context`, `history`) and yields
//! (`segment`, `exchange`), the agents shipped with ledgerwire
//! (`builtin`, `minimal`, `scenario`, `model`) and [`by_name`], the one
//! place that names them all. This file declares the modules, re-exports
//! what callers name as `agent::…`, and holds `by_name`. The contract
//! treats the agent as internal: it yields frames, and the server numbers
//! them (`seq`), mints pause ids, records them and streams them.
//! Must never: touch the ledger, or depend on anything but its
//! [`TurnContext`]; an agent is deterministic, so a replayed conversation
//! produces the same frames. The one agent that reaches the network
//! (`model`) hands every exchange to the server to record, and reads it
//! back from the context, so it is deterministic in its context too.

pub mod builtin;
pub mod context;
pub mod driver;
pub mod exchange;
pub mod frames;
pub mod history;
pub mod minimal;
pub mod model;
pub mod scenario;
pub mod segment;

pub use context::{AnsweredPause, TurnContext};
pub use driver::{Agent, AgentIdentity, labels_before_switches};
pub use history::{
    DIGEST_MAX_BYTES, DIGEST_TURNS, PastCard, PastTurn, RECALL_CALLS_PER_TURN,
    RECALL_TURNS_PER_CALL, Recall, RecallSpent, RecallStore,
};
pub use segment::{Beat, Fault, SegmentBeats, SegmentFrames, Step, play, play_beats};

/// The agent of this build with `name` (`builtin`, `minimal`,
/// `scenario` with its scripts in `scenarios`, `model` as a replay reads
/// it: its recorded exchanges, no endpoint); `Ok(None)` for a name this
/// build does not have.
pub fn by_name(
    name: &str,
    scenarios: &std::path::Path,
) -> Result<Option<std::sync::Arc<dyn Agent>>, scenario::ScenarioError> {
    Ok(match name {
        "builtin" => Some(std::sync::Arc::new(builtin::BuiltinAgent::default())),
        "minimal" => Some(std::sync::Arc::new(minimal::MinimalAgent::default())),
        "scenario" => Some(std::sync::Arc::new(scenario::ScenarioAgent::load(
            scenarios,
        )?)),
        "model" => Some(std::sync::Arc::new(model::ModelAgent::replay())),
        _ => None,
    })
}
