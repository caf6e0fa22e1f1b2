//! What of one reply has been printed, and a reply document's change
//! turned back into the Studio frames to render: pure, over the message
//! documents' shape (`harness::transcript::Reply`).
//!
//! Owns: which of a reply's frames count as new, and where the text and
//! suggestions (which keep no seq) go among them.
//! Must never: yield a frame it yielded before, or one the document does
//! not hold (the text and suggestions frames it makes carry the
//! document's own text and list).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

/// What of one reply has been printed.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Printed {
    /// Every frame the reply holds up to this seq is printed.
    seq: u64,
    /// The text printed (the deltas so far, or the complete text).
    text: String,
    complete: bool,
    /// The status printed for each step id.
    steps: BTreeMap<String, Value>,
    suggestions: Vec<Value>,
}

impl Printed {
    /// Everything `reply` holds, as printed.
    pub(super) fn all(reply: &Value) -> Self {
        let mut printed = Self::default();
        printed.advance(reply);
        printed
    }

    /// The frames to render for what `reply` holds beyond what is
    /// printed, in seq order (a step only when its status changed), and
    /// marks them printed. The text and the suggestions keep no seq: the
    /// text takes the first new seq no kept frame has after the reply's
    /// approval, steps and cards, the suggestions the last one; agents
    /// write both after those and before a `plan.versioned` or the frame
    /// that ends the segment, so this is where their frames were even when
    /// one packet brought several changes (deltas it brought together
    /// print as one).
    pub(super) fn advance(&mut self, reply: &Value) -> Vec<Value> {
        let last = reply["last_seq"].as_u64().unwrap_or(0).max(self.seq);
        let ending = ["plan", "questions", "error", "done"]
            .into_iter()
            .map(|key| &reply[key]);
        let work = ["approved"].into_iter().map(|key| &reply[key]).chain(
            ["plan_versions", "steps", "cards"]
                .into_iter()
                .flat_map(|key| reply[key].as_array().into_iter().flatten()),
        );
        let work: Vec<&Value> = work.filter(|f| f.is_object()).collect();
        let ending: Vec<&Value> = ending.filter(|f| f.is_object()).collect();
        let seq_of = |frame: &Value| frame["seq"].as_u64();
        let accounted: BTreeSet<u64> = work
            .iter()
            .chain(&ending)
            .filter_map(|f| seq_of(f))
            .collect();

        // Sorted by (seq, 1); the text and suggestions by (seq, 0), before
        // a frame of the same seq.
        let mut news: Vec<((u64, u8), Value)> = Vec::new();
        for frame in work.iter().chain(&ending) {
            let Some(seq) = seq_of(frame).filter(|seq| *seq > self.seq) else {
                continue;
            };
            if frame["event"] == "activity.step" {
                let step = frame["step_id"].to_string();
                if self.steps.get(&step) == Some(&frame["status"]) {
                    continue;
                }
                self.steps.insert(step, frame["status"].clone());
            }
            news.push(((seq, 1), (*frame).clone()));
        }

        // Before the ending frame, or after everything.
        let fallback = ending
            .iter()
            .filter_map(|f| seq_of(f))
            .filter(|seq| *seq > self.seq)
            .min()
            .unwrap_or(last.saturating_add(1));
        let floor = self
            .seq
            .max(reply["first_seq"].as_u64().unwrap_or(1).saturating_sub(1))
            .saturating_add(1);
        // A re-offered plan's `plan.versioned` follows its text.
        let after_work = work
            .iter()
            .filter(|f| f["event"] != "plan.versioned")
            .filter_map(|f| seq_of(f))
            .max()
            .map_or(floor, |seq| seq.saturating_add(1))
            .max(floor);
        // Each search stops within `accounted.len() + 1` steps.
        let loose = |from: u64| (from..=last).find(|seq| !accounted.contains(seq));
        let text_at = loose(after_work).unwrap_or(fallback);
        let suggestions_at = (floor..=last)
            .rev()
            .find(|seq| !accounted.contains(seq))
            .unwrap_or(fallback)
            .max(text_at);

        let text = reply["text"].as_str().unwrap_or_default();
        let complete = reply["complete"] == true;
        if complete && (!self.complete || self.text != text) {
            let frame = json!({"event": "message.complete", "text": text});
            news.push(((text_at, 0), frame));
        } else if !complete && self.text != text {
            let delta = text.strip_prefix(self.text.as_str()).unwrap_or(text);
            if !delta.is_empty() {
                let frame = json!({"event": "message.delta", "text": delta});
                news.push(((text_at, 0), frame));
            }
        }
        text.clone_into(&mut self.text);
        self.complete = complete;
        let suggestions = reply["suggestions"].as_array().cloned().unwrap_or_default();
        if suggestions != self.suggestions {
            let frame = json!({"event": "suggestions", "suggestions": suggestions});
            news.push(((suggestions_at, 0), frame));
            self.suggestions = suggestions;
        }

        // Stable: the text before the suggestions at one place.
        news.sort_by_key(|(key, _)| *key);
        self.seq = last;
        news.into_iter().map(|(_, frame)| frame).collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn events(frames: &[Value]) -> Vec<&str> {
        frames
            .iter()
            .map(|f| f["event"].as_str().unwrap_or_default())
            .collect()
    }

    fn step(seq: u64, id: &str, status: &str) -> Value {
        json!({"event": "activity.step", "seq": seq, "step_id": id, "status": status, "label": id})
    }

    #[test]
    fn a_reply_read_at_once_renders_in_seq_order() {
        let reply = json!({
            "kind": "reply", "first_seq": 3, "last_seq": 12, "status": "done",
            "approved": {"event": "plan.approved", "seq": 3, "title": "T"},
            "steps": [step(5, "step-1", "complete"), step(7, "step-2", "complete")],
            "cards": [{"event": "component.created", "seq": 8, "title": "Card"}],
            "text": "The value rose.", "complete": true,
            "suggestions": ["Compare"],
            "done": {"event": "done", "seq": 12},
        });
        let mut printed = Printed::default();
        let frames = printed.advance(&reply);
        assert_eq!(
            events(&frames),
            [
                "plan.approved",
                "activity.step",
                "activity.step",
                "component.created",
                "message.complete",
                "suggestions",
                "done"
            ]
        );
        assert!(printed.advance(&reply).is_empty(), "nothing twice");
        assert_eq!(printed, Printed::all(&reply));
    }

    #[test]
    fn a_streaming_reply_renders_each_change_once() {
        let mut reply = json!({
            "kind": "reply", "first_seq": 1, "last_seq": 1, "status": "streaming",
            "steps": [step(1, "step-1", "running")], "text": "", "complete": false,
            "suggestions": [],
        });
        let mut printed = Printed::default();
        assert_eq!(events(&printed.advance(&reply)), ["activity.step"]);

        // The step completes, then the text starts.
        reply["steps"] = json!([step(2, "step-1", "complete")]);
        reply["text"] = json!("Looking");
        reply["last_seq"] = json!(3);
        let frames = printed.advance(&reply);
        assert_eq!(events(&frames), ["activity.step", "message.delta"]);
        assert_eq!(frames[0]["status"], "complete");
        assert_eq!(frames[1]["text"], "Looking");

        // The text grows (the growth only), a step frame with the same
        // status again is not news, and the plan ends the segment.
        reply["steps"] = json!([step(4, "step-1", "complete")]);
        reply["text"] = json!("Looking up");
        reply["plan"] = json!({"event": "plan.proposed", "seq": 6, "interrupt_id": "int-1-6"});
        reply["last_seq"] = json!(6);
        let frames = printed.advance(&reply);
        assert_eq!(events(&frames), ["message.delta", "plan.proposed"]);
        assert_eq!(frames[0]["text"], " up");
        assert!(printed.advance(&reply).is_empty(), "nothing twice");
    }

    #[test]
    fn a_re_offered_plan_read_at_once_keeps_its_text_before_the_version() {
        let reply = json!({
            "kind": "reply", "first_seq": 3, "last_seq": 5, "status": "paused",
            "text": "Switched Chart to Table.", "complete": false,
            "plan_versions": [{"event": "plan.versioned", "seq": 4, "version": 2}],
            "plan": {"event": "plan.proposed", "seq": 5, "interrupt_id": "int-1-5"},
            "suggestions": [],
        });
        let frames = Printed::default().advance(&reply);
        assert_eq!(
            events(&frames),
            ["message.delta", "plan.versioned", "plan.proposed"]
        );
    }
}
