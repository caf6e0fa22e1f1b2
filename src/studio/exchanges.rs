//! The model agent's calls in a conversation's state: which completed
//! calls a segment may reuse instead of asking the model again.
//!
//! Owns: keeping, per turn, the completed calls at the turn's latest
//! answer, and handing a segment those of its starting point. Must
//! never: keep a failed call (a retried segment asks again), a request
//! body (the log keeps it for audit and replay), or an earlier turn's
//! calls.

use std::sync::Arc;

use super::conversation::{Conversation, Turn};
use super::records::ModelExchanged;
use crate::agent::model::exchange::ModelExchange;

/// Folds a model call into its turn.
pub(super) fn model_exchanged(state: &mut Conversation, record: ModelExchanged) {
    let current = state.turns.len();
    let Some(turn) = usize::try_from(record.turn)
        .ok()
        .filter(|turn| *turn == current)
        .and_then(|turn| state.turns.get_mut(turn - 1))
    else {
        state.ignored += 1;
        return;
    };
    if record.reply.is_none() {
        return;
    }
    // Calls from before the latest answer can no longer be reused.
    turn.exchanges.retain(|kept| kept.answers >= record.answers);
    turn.exchanges
        .retain(|kept| !(kept.answers == record.answers && kept.index == record.index));
    turn.exchanges.push(record.exchange(false));
}

/// The completed calls a segment of `turn` starting from `answers`
/// answered pauses may reuse.
pub(super) fn reusable(turn: &Turn, answers: usize) -> Arc<Vec<ModelExchange>> {
    let Ok(answers) = u32::try_from(answers) else {
        return Arc::default();
    };
    Arc::new(
        turn.exchanges
            .iter()
            .filter(|kept| kept.answers == answers)
            .cloned()
            .collect(),
    )
}
