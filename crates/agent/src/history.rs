//! Earlier turns as an agent may read them: the conversation digest's
//! records and bounds, and the recall tool for what lies past them.
//!
//! Owns: [`PastTurn`], [`PastCard`], the digest's bounds
//! ([`DIGEST_TURNS`], [`DIGEST_MAX_BYTES`]) and the recall tool
//! ([`Recall`]) with its per-turn budget. Must never: read the ledger
//! (the server hands it a [`RecallStore`] over the conversation state),
//! return rows, or answer past [`RECALL_CALLS_PER_TURN`] calls in a turn.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

/// An earlier turn of the conversation, as the conversation digest keeps
/// it: the user's message, the assistant's close, the resulting cards.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PastTurn {
    pub turn: u32,
    /// The user's message.
    pub message: String,
    /// The turn's closing `message.complete` text, if it closed with one.
    pub close: Option<String>,
    /// The cards the turn created or revised (titles, never rows).
    pub cards: Vec<PastCard>,
}

/// A card as the digests describe it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PastCard {
    pub component_id: String,
    pub component_type: String,
    pub title: String,
}

impl PastTurn {
    /// Bytes the record weighs against [`DIGEST_MAX_BYTES`].
    pub fn weight_bytes(&self) -> usize {
        self.message.len()
            + self.close.as_ref().map_or(0, String::len)
            + self
                .cards
                .iter()
                .map(|c| c.component_id.len() + c.component_type.len() + c.title.len())
                .sum::<usize>()
    }

    /// Whether `needle` (lower-case) occurs in the message, close or a card title.
    fn mentions(&self, needle: &str) -> bool {
        let hit = |text: &str| text.to_lowercase().contains(needle);
        hit(&self.message)
            || self.close.as_deref().is_some_and(hit)
            || self.cards.iter().any(|card| hit(&card.title))
    }
}

/// Calls of the recall tool one segment may make (the contract's three
/// per turn; the built-in agent recalls only in a turn's first segment).
pub const RECALL_CALLS_PER_TURN: u8 = 3;
/// Turn records one recall call returns, at most.
pub const RECALL_TURNS_PER_CALL: usize = DIGEST_TURNS;

/// Where the recall tool reads earlier turns: the conversation state.
pub trait RecallStore: Send + Sync + std::fmt::Debug {
    /// Hands `visit` the conversation's earlier turns (those before the
    /// one running), newest first, until it returns false; a turn is read
    /// only when it is visited.
    fn visit_newest_first(&self, visit: &mut dyn FnMut(PastTurn) -> bool);
}

impl RecallStore for Vec<PastTurn> {
    fn visit_newest_first(&self, visit: &mut dyn FnMut(PastTurn) -> bool) {
        for past in self.iter().rev() {
            if !visit(past.clone()) {
                break;
            }
        }
    }
}

/// The third call of a turn was the last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the recall tool answers {RECALL_CALLS_PER_TURN} calls per turn, and they are spent")]
pub struct RecallSpent;

/// The recall tool: what lies past the digests' bounds, served on demand
/// by a mechanical lookup of turn records (messages, closes, card titles;
/// never rows), at most [`RECALL_CALLS_PER_TURN`] calls.
#[derive(Clone, Debug)]
pub struct Recall {
    store: Arc<dyn RecallStore>,
    used: Arc<AtomicU8>,
}

impl Default for Recall {
    fn default() -> Self {
        Self::new(Arc::new(Vec::<PastTurn>::new()))
    }
}

impl Recall {
    pub fn new(store: Arc<dyn RecallStore>) -> Self {
        Self {
            store,
            used: Arc::new(AtomicU8::new(0)),
        }
    }

    /// Calls left this turn.
    pub fn calls_left(&self) -> u8 {
        RECALL_CALLS_PER_TURN.saturating_sub(self.used.load(Ordering::Relaxed))
    }

    fn spend(&self) -> Result<(), RecallSpent> {
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                (used < RECALL_CALLS_PER_TURN).then_some(used + 1)
            })
            .map(|_| ())
            .map_err(|_| RecallSpent)
    }

    /// Up to [`RECALL_TURNS_PER_CALL`] turns older than `turn`, newest first.
    pub fn before(&self, turn: u32) -> Result<Vec<PastTurn>, RecallSpent> {
        self.spend()?;
        Ok(self.collect(|past| past.turn < turn))
    }

    /// Up to [`RECALL_TURNS_PER_CALL`] turns whose message, close or card
    /// titles contain `text` (ignoring case), newest first.
    pub fn search(&self, text: &str) -> Result<Vec<PastTurn>, RecallSpent> {
        self.spend()?;
        let needle = text.to_lowercase();
        Ok(self.collect(|past| past.mentions(&needle)))
    }

    /// The newest turns `keep` accepts, at most one call's worth.
    fn collect(&self, keep: impl Fn(&PastTurn) -> bool) -> Vec<PastTurn> {
        let mut found = Vec::new();
        self.store.visit_newest_first(&mut |past| {
            if keep(&past) {
                found.push(past);
            }
            found.len() < RECALL_TURNS_PER_CALL
        });
        found
    }
}

/// Earlier turns in the digest, at most (the contract's newest 10).
pub const DIGEST_TURNS: usize = 10;
/// Bytes of earlier messages in the digest, at most; older turns go first.
pub const DIGEST_MAX_BYTES: usize = 16 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    fn past(turn: u32, message: &str, close: Option<&str>, card: Option<&str>) -> PastTurn {
        PastTurn {
            turn,
            message: message.to_owned(),
            close: close.map(str::to_owned),
            cards: card
                .map(|title| PastCard {
                    component_id: format!("cmp-{turn}"),
                    component_type: "table".to_owned(),
                    title: title.to_owned(),
                })
                .into_iter()
                .collect(),
        }
    }

    #[test]
    fn recall_pages_back_searches_records_and_stops_after_three_calls() {
        let mut store: Vec<PastTurn> = (1..=25)
            .map(|turn| past(turn, &format!("question {turn}"), None, None))
            .collect();
        store[2] = past(3, "hello", Some("Kenya's life expectancy rose."), None);
        store[4] = past(5, "hello", None, Some("Population of Chad"));
        let recall = Recall::new(Arc::new(store));
        let page = recall.before(26).expect("first call");
        assert_eq!(page.len(), RECALL_TURNS_PER_CALL);
        assert_eq!((page[0].turn, page[9].turn), (25, 16));
        let found = recall.search("CHAD").expect("second call");
        assert_eq!(found.iter().map(|p| p.turn).collect::<Vec<_>>(), [5]);
        let found = recall.search("kenya").expect("third call");
        assert_eq!(found[0].turn, 3);
        assert_eq!(recall.calls_left(), 0);
        assert_eq!(recall.before(3), Err(RecallSpent));
    }
}
