//! What an attach wants to read: the `harness-sdk/interest` document, a
//! client-owned synced document (`set`, `patch`) holding how many of the
//! newest messages to mount and which older ones besides. An interest
//! changes what one attach sees, never durable state. Pure.
//!
//! Must never: accept an interest that names more documents than the
//! bounds below.
//! Owns: the interest document's shape, bounds and selection.

use serde::Deserialize;
use serde_json::Value;

use super::transcript::ThreadState;

/// Newest messages an attach sees without an interest document.
pub const DEFAULT_LATEST_MESSAGES: usize = 20;
/// Most newest messages an interest may ask for.
pub const MAX_LATEST_MESSAGES: usize = 256;
/// Most message ids an interest may name besides the newest.
pub const MAX_NAMED_MESSAGES: usize = 256;
/// Longest message id an interest may name, in bytes.
pub const MAX_MESSAGE_ID_BYTES: usize = 64;

/// The interest document: `{"latest": n, "messages": [id, …]}`, both
/// optional.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Interest {
    #[serde(default = "default_latest")]
    pub latest: usize,
    #[serde(default)]
    pub messages: Vec<String>,
}

fn default_latest() -> usize {
    DEFAULT_LATEST_MESSAGES
}

impl Default for Interest {
    fn default() -> Self {
        Self {
            latest: DEFAULT_LATEST_MESSAGES,
            messages: Vec::new(),
        }
    }
}

impl Interest {
    /// Reads and bounds an interest document; the error says what to fix.
    pub fn parse(value: &Value) -> Result<Self, String> {
        let interest: Interest = serde_json::from_value(value.clone()).map_err(|error| {
            format!(
                "an interest is {{\"latest\": <count>, \"messages\": [<message id>, …]}}: {error}"
            )
        })?;
        if interest.latest > MAX_LATEST_MESSAGES {
            return Err(format!(
                "latest is {}; at most {MAX_LATEST_MESSAGES} of the newest messages can be mounted",
                interest.latest
            ));
        }
        if interest.messages.len() > MAX_NAMED_MESSAGES {
            return Err(format!(
                "messages names {} ids; at most {MAX_NAMED_MESSAGES} are accepted",
                interest.messages.len()
            ));
        }
        if let Some(id) = interest
            .messages
            .iter()
            .find(|id| id.is_empty() || id.len() > MAX_MESSAGE_ID_BYTES)
        {
            return Err(format!(
                "message id {id:?} is empty or longer than {MAX_MESSAGE_ID_BYTES} bytes"
            ));
        }
        Ok(interest)
    }

    /// An attach's interest: its document's, or the default when it has
    /// none (or one no longer valid, which `set`/`patch` never leave).
    pub fn of(document: Option<&Value>) -> Self {
        document
            .and_then(|value| Self::parse(value).ok())
            .unwrap_or_default()
    }

    /// The ids of the messages to mount, oldest first: the newest
    /// `latest`, and every named one the conversation has.
    pub fn select(&self, thread: &ThreadState) -> Vec<(u32, String)> {
        let mut chosen: Vec<(u32, String)> = thread
            .message_ids()
            .rev()
            .take(self.latest)
            .map(|(turn, id)| (turn, id.to_owned()))
            .collect();
        for id in &self.messages {
            if chosen.iter().any(|(_, c)| c == id) {
                continue;
            }
            if let Some(turn) = thread.turn_of(id) {
                chosen.push((turn, id.clone()));
            }
        }
        chosen.sort_by_key(|(turn, id)| (*turn, position_in_turn(thread, *turn, id)));
        chosen
    }
}

fn position_in_turn(thread: &ThreadState, turn: u32, id: &str) -> usize {
    usize::try_from(turn)
        .ok()
        .and_then(|t| t.checked_sub(1))
        .and_then(|i| thread.index.get(i))
        .and_then(|index| index.messages.iter().position(|m| m == id))
        .unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::transcript::TurnIndex;

    fn thread() -> ThreadState {
        ThreadState {
            index: vec![
                TurnIndex {
                    turn: 1,
                    messages: vec!["t1-user".into(), "t1-seg1".into()],
                    cancelled: false,
                },
                TurnIndex {
                    turn: 2,
                    messages: vec!["t2-user".into(), "t2-seg2".into(), "t2-answer1".into()],
                    cancelled: false,
                },
            ],
            ..ThreadState::default()
        }
    }

    #[test]
    fn interests_pick_the_newest_and_the_named_messages_in_order() {
        let thread = thread();
        let ids = |interest: Interest| -> Vec<String> {
            interest
                .select(&thread)
                .into_iter()
                .map(|(_, id)| id)
                .collect()
        };
        assert_eq!(ids(Interest::default()).len(), 5);
        let two = Interest::parse(&json!({"latest": 2})).unwrap();
        assert_eq!(ids(two), ["t2-seg2", "t2-answer1"]);
        let named =
            Interest::parse(&json!({"latest": 1, "messages": ["t1-user", "t9-user"]})).unwrap();
        assert_eq!(ids(named), ["t1-user", "t2-answer1"]);
    }

    #[test]
    fn interests_are_bounded_and_say_what_to_fix() {
        assert!(
            Interest::parse(&json!({"latest": 257}))
                .unwrap_err()
                .contains("256")
        );
        assert!(Interest::parse(&json!({"colour": 1})).is_err());
        assert!(Interest::parse(&json!({"messages": [""]})).is_err());
        let many: Vec<String> = (0..257).map(|i| format!("t{i}-user")).collect();
        assert!(Interest::parse(&json!({"messages": many})).is_err());
        assert_eq!(Interest::of(Some(&json!("nonsense"))), Interest::default());
    }
}
