//! The model agent's calls in a conversation's state: which completed
//! calls a segment may reuse instead of asking the model again.
//!
//! Owns: keeping, per turn, the completed calls at the turn's latest
//! answer, and handing a segment those of its starting point. Must
//! never: keep a failed call (a retried segment asks again), a request
//! body (the log keeps it for audit and replay), or an earlier turn's
//! calls.

use std::sync::Arc;

use super::records::ModelExchangedV2;
use super::turns::{Turn, Turns};
use ledgerwire_agent::model::exchange::ModelExchange;

/// Folds a model call into its turn; false when it is not the current
/// turn's (the fold counts the record as ignored).
pub(super) fn model_exchanged(turns: &mut Turns, record: ModelExchangedV2) -> bool {
    let current = turns.len();
    let Some(turn) = usize::try_from(record.turn)
        .ok()
        .filter(|turn| *turn == current)
        .and_then(|turn| turns.get_mut(turn - 1))
    else {
        return false;
    };
    if record.reply.is_none() {
        return true;
    }
    // Calls from before the latest answer can no longer be reused.
    turn.exchanges.retain(|kept| kept.answers >= record.answers);
    turn.exchanges
        .retain(|kept| !(kept.answers == record.answers && kept.index == record.index));
    turn.exchanges.push(record.exchange(false));
    true
}

/// A new turn starts: the one before can no longer be resumed, so its
/// calls go (a turn that kept none is not touched, nor thawed from a
/// snapshot).
pub(super) fn turn_started(turns: &mut Turns) {
    let kept = turns.last().is_some_and(|turn| !turn.exchanges.is_empty());
    let last = turns.len().checked_sub(1);
    if let Some(turn) = last.filter(|_| kept).and_then(|i| turns.get_mut(i)) {
        turn.exchanges.clear();
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A call as an older build recorded it (kind 27), upgraded.
    fn call(turn: u32, answers: u32, index: u32, reply: Option<&str>) -> ModelExchangedV2 {
        super::super::records::ModelExchanged {
            turn,
            segment: 1,
            answers,
            index,
            request_digest: format!("d{index}"),
            request: "{}".into(),
            reply: reply.map(str::to_owned),
            error: reply.is_none().then(|| "timed out".to_owned()),
            bad_output: false,
            elapsed_ms: 1,
        }
        .into()
    }

    #[test]
    fn a_turn_keeps_its_completed_calls_at_its_latest_answer_only() {
        let mut turns = Turns::default();
        turns.push(Turn::paused_on_a_plan(1, "int-1-2", false));
        assert!(model_exchanged(&mut turns, call(1, 0, 0, Some("a"))));
        assert!(model_exchanged(&mut turns, call(1, 0, 1, None)));
        assert!(!model_exchanged(
            &mut turns,
            call(2, 0, 0, Some("other turn"))
        ));
        let turn = turns.last().unwrap();
        assert_eq!(
            reusable(turn, 0).len(),
            1,
            "failed calls and other turns are not kept"
        );
        model_exchanged(&mut turns, call(1, 1, 0, Some("b")));
        let turn = turns.last().unwrap();
        assert_eq!(
            reusable(turn, 0).len(),
            0,
            "calls before the latest answer go"
        );
        assert_eq!(reusable(turn, 1)[0].reply.as_deref(), Some("b"));
        assert!(
            reusable(turn, 1)[0].request.is_empty(),
            "no request body is kept"
        );
        turn_started(&mut turns);
        assert!(turns.last().unwrap().exchanges.is_empty());
    }

    #[test]
    fn a_streaming_call_is_kept_once_complete_with_its_text_cuts() {
        let mut turns = Turns::default();
        turns.push(Turn::paused_on_a_plan(1, "int-1-2", false));
        let mut started = call(1, 0, 0, None);
        (started.error, started.streaming) = (None, true);
        assert!(model_exchanged(&mut turns, started));
        assert!(reusable(turns.last().unwrap(), 0).is_empty());
        let mut done = call(1, 0, 0, Some("{\"tool\":\"answer\"}"));
        done.text_cuts = vec![4, 9];
        assert!(model_exchanged(&mut turns, done));
        let kept = reusable(turns.last().unwrap(), 0);
        assert_eq!(kept[0].text_cuts, [4, 9]);
    }
}
